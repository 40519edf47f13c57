/* dyntools.h — what the tools namespace (dyntools.c: define, list, get, delete, call,
 * promote) shares with its runner (dyntools_run.c: one confined Python process per call
 * or per definition's tests). src/builtin only. */
#ifndef ABX_BUILTIN_DYNTOOLS_H
#define ABX_BUILTIN_DYNTOOLS_H

#include "core/dyndef.h"
#include "pipeline/ctx.h"

#define DYN_CALL_TIMEOUT_MS 60000
#define DYN_TESTS_TIMEOUT_MS 60000

/* Run def's code in a confined Python process for the call in ctx: args (a call) or
 * tests (the definition's tests, args NULL). host.* calls from inside enter the pipeline
 * as principal `as`. On success *out (owned) is {result} or {tests: [...]}; otherwise the
 * reply holds the error (503 sandbox.unavailable, 502 op.worker_failed, 422 tools.raised). */
abx_err abx__dyn_exec(abx_ctx *ctx, const abx_dyndef *def, const json_t *args, const char *as, json_t **out,
                      abx_reply *r);

#endif
