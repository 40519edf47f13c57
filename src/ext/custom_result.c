/* custom_result.c — the result of a declarative command. Without `result:` it is
 * commands.run's (declared as such); with `result: {name: TYPE}` the command prints one
 * JSON object with those fields on stdout, and that object is the op's result: a command
 * that fails, prints something else, or leaves out a declared field answers
 * op.bad_result, so the declared schema always holds. */
#include "ext/ext.h"
#include "builtin/results.h"
#include "pipeline/ctx.h"
#include <stdio.h>
#include <string.h>

const abx_param abx__custom_run_result[] = {ABX_RUN_FIELDS, {0}};

/* details of a refused result: what the command did, for the caller to fix it */
static json_t *run_details(const json_t *run)
{
    json_t *d = json_object();
    static const char *const keys[] = {"status", "exit_code", "signal", "stderr"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (json_object_get(run, keys[i]))
            json_object_set(d, keys[i], json_object_get(run, keys[i]));
    return d;
}

abx_err abx__custom_result(const abx_param *fields, abx_reply *r)
{
    json_t *run = abx_reply_body(r);
    if (!json_is_object(run))
        return abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "the command left no result");
    const json_t *code = json_object_get(run, "exit_code");
    if (!json_is_integer(code) || json_integer_value(code) != 0)
        return abx_reply_error(r, ABX_E_OP_BAD_RESULT, run_details(run),
                               "the command did not succeed (status %s), so it printed no result",
                               json_string_value(json_object_get(run, "status")) ?: "?");
    const char *out = json_string_value(json_object_get(run, "stdout"));
    json_error_t jerr;
    json_t *obj = out ? json_loads(out, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!json_is_object(obj) || json_is_true(json_object_get(run, "stdout_truncated"))) {
        json_decref(obj);
        return abx_reply_error(r, ABX_E_OP_BAD_RESULT, run_details(run),
                               "the command's standard output is not one JSON object (its declared result)");
    }
    abx_op_def def = {.params = fields};
    abx_op op = {.def = &def, .id = "result"};
    char msg[300];
    if (abx_args_validate(&op, obj, msg, sizeof msg) != ABX_OK) {
        json_decref(obj);
        return abx_reply_error(r, ABX_E_OP_BAD_RESULT, run_details(run),
                               "the command's output does not match its declared result: %s", msg);
    }
    abx_reply_json(r, obj);
    return ABX_OK;
}
