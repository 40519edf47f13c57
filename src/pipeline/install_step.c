/* install_step.c — step 8's lazy install (the seed's chapter 06): an op's declared
 * requirements (abx_op_def.install) are checked against install.allow before anything
 * runs, and after admission the first call that needs one installs it (sandbox/install.c:
 * once, concurrent calls wait for the same install), recording it in its ledger group. */
#include "pipeline/pipeline.h"
#include "sandbox/install.h"
#include <limits.h>
#include <stdio.h>
#include <string.h>

static bool allowed(const abx_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_install_allow; i++)
        if (strcmp(cfg->install_allow[i], name) == 0)
            return true;
    return false;
}

int abx_install_setup(abx_server *s, const char *dir, char *errbuf, size_t errlen)
{
    s->install_dir = abx_strdup(dir);
    s->installer = s->install_dir ? abx_installer_new(s->procs, dir, s->cfg.install_registry, errbuf, errlen) : NULL;
    return s->installer ? 0 : -1;
}

static bool allowed_or_present(abx_request *r, const char *name)
{
    char prog[PATH_MAX];
    bool have = r->server->install_dir && abx_install_program(r->server->install_dir, name, prog, sizeof prog);
    if (have || allowed(&r->server->cfg, name))
        return true;
    abx_fail(r, ABX_E_INSTALL_NOT_ALLOWED, "%s needs '%s', which is not installed, and install.allow does not name it",
             r->op->id, name);
    return false;
}

/* Before anything runs: a requirement that is missing and not allowed refuses the call. */
abx_step abx_install_gate(abx_request *r)
{
    const abx_op_def *d = r->op->def;
    for (size_t i = 0; i < ABX_MAX_INSTALL && d->install[i]; i++)
        if (!allowed_or_present(r, d->install[i]))
            return ABX_STEP_FAIL;
    return ABX_STEP_NEXT;
}

static void record(abx_request *r, const char *name, bool ok, const char *why, int64_t ms)
{
    abx_ledger *l = r->server->ledger;
    if (!l || !r->group_id)
        return;
    const abx_install_manifest *m = abx_install_manifest_find(name);
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "kind", "install", "at", at, "name", name,
                          "package", m ? m->package : "", "version", m ? m->version : "", "integrity",
                          m ? m->integrity : "", "result", ok ? "installed" : "failed", "duration_ms", (json_int_t)ms);
    if (!ok)
        json_object_set_new(e, "error", json_string(why));
    json_t *events = json_pack("[o]", e);
    abx_ledger_append(l, r->group_id, events, true);
    json_decref(events);
}

static bool ensure_one(abx_request *r, const char *name)
{
    if (!r->server->installer) {
        abx_fail(r, ABX_E_INSTALL_FAILED, "no installer (the server did not start one)");
        return false;
    }
    char why[600] = "";
    int64_t t0 = abx_now_ms();
    int rc = abx_install_ensure(r->server->installer, name, &r->policy->egress_resolve, why, sizeof why);
    if (rc == 1 || rc == -1) /* the call that ran the install records it; those that waited do not */
        record(r, name, rc == 1, why, abx_now_ms() - t0);
    if (rc < 0) {
        abx_log("warn", r->id, "install of %s failed: %s", name, why);
        abx_fail(r, ABX_E_INSTALL_FAILED, "installing '%s' failed: %s", name, why);
        return false;
    }
    return true;
}

/* After admission: install what is missing (once), or fail with the installer's message. */
abx_step abx_install_ensure_step(abx_request *r)
{
    const abx_op_def *d = r->op->def;
    for (size_t i = 0; i < ABX_MAX_INSTALL && d->install[i]; i++)
        if (!ensure_one(r, d->install[i]))
            return ABX_STEP_FAIL;
    return ABX_STEP_NEXT;
}

abx_err abx_ctx_require(abx_ctx *ctx, const char *name)
{
    abx_request *r = ctx->req;
    if (!allowed_or_present(r, name) || !ensure_one(r, name))
        return r->reply.err;
    return ABX_OK;
}
