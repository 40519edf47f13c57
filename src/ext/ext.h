/* ext.h — operations that come from outside the binary, all declared by the config
 * and registered into the server's child registry before it freezes:
 *   - declarative commands (`custom:`, custom.c): a fixed program and argv template;
 *   - plugins (`load: ["name"]`, plugin.c): shared objects from the plugin folder that
 *     declare ops through the public C API;
 *   - Python op workers (`load: ["python:pkg.mod"]`, pyworker.c): a confined process
 *     that reports its ops' catalog and runs them, spoken to in JSON lines.
 * Nothing is loaded that the config does not name. Every op registered here goes
 * through the same registry rules, policy, ledger and discovery as the built-ins. */
#ifndef ABX_EXT_EXT_H
#define ABX_EXT_EXT_H

#include "config/config.h"
#include "core/core.h"
#include "core/util.h"
#include "sandbox/procs.h"

typedef struct abx_ext abx_ext;
typedef struct abx_pyworker abx_pyworker;
struct abx_namespace;
struct abx_policy;

/* A declarative command as the legacy routes see it (POST /commands/{name}). */
typedef struct abx_ext_command {
    const char *name;            /* the original name from the config (borrowed from the arena) */
    const char *id;              /* custom.<mangled> */
    int line;
} abx_ext_command;

struct abx_ext {
    abx_arena *arena;            /* owned: declarations, strings and parameters of every op below */
    abx_ext_command *commands;   /* owned (arena) */
    size_t n_commands;
    struct ext_origin { const char *id; int line; } *origins; /* owned (arena): op id → config line */
    size_t n_origins, cap_origins;
    void **handles;              /* owned: dlopen handles, closed after the registry is freed */
    size_t n_handles;
    abx_pyworker **workers;      /* owned */
    size_t n_workers;
    json_t *declared;            /* owned: {custom, load, plugin_dir, python} as loaded (reload compares) */
    char pydir[64];              /* private folder holding abx_ops.py for the workers ("" = none yet) */
};

/* Load and register everything the config declares (custom, load) into reg.
 * Diagnostics (with config lines) go to d. Returns the extension state (owned by
 * the caller; also when d has errors, so it can be freed) or NULL on OOM. */
abx_ext *abx_ext_load(abx_registry *reg, const abx_config *cfg, const char *workspace, abx_diags *d);
/* Stop workers and close plugins; call after the registry that holds their ops is freed. */
void abx_ext_free(abx_ext *e);
/* The config line that declared op id (0 = not from the config). */
int abx_ext_line_of(const abx_ext *e, const char *id);
/* A declarative command by its original name, or NULL. */
const abx_ext_command *abx_ext_command_find(const abx_ext *e, const char *name);
/* The i-th declarative command's op id and original name (*name), or NULL past the
 * last; ud is the abx_ext. The server installs it as the pipeline's command registry
 * (abx_command_at_fn). */
const char *abx_ext_command_at(void *ud, size_t i, const char **name);

/* At server start (after the policy compiled) and at each reload: compute, for each
 * Python worker, the union of the roots the statements mounting its ops grant under
 * policy p, and (re)start it confined to them (a busy worker at its next call). 0, or
 * -1 with why. */
int abx_ext_workers_start(abx_ext *e, abx_procs *procs, const abx_registry *reg, const struct abx_policy *policy,
                          char *err, size_t errlen);
/* Stop the workers' processes (server stop, while the process manager still runs). */
void abx_ext_workers_stop(abx_ext *e);
/* Reload: warn when custom:/load: changed (ops are registered once, at start). */
void abx_ext_reload_check(const abx_ext *e, const abx_config *fresh, abx_diags *d);

/* The declarative commands' namespace (custom.*): no op table (they are registered at
 * load) and no state; it tells the approval binder the argv a held call will run. */
extern const struct abx_namespace abx_ext_ns_custom;

/* internal: each form's loader (custom.c, plugin.c, pyworker.c) */
void abx__ext_origin(abx_ext *e, const char *id, int line);
int abx__ext_custom_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *workspace, abx_diags *d);
int abx__ext_plugin_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *name, int line,
                         abx_diags *d);
int abx__ext_python_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *module, int line,
                         abx_diags *d);
void abx__pyworker_free(abx_pyworker *w);
/* custom_result.c: a declarative command's result (commands.run's, or the declared one) */
extern const abx_param abx__custom_run_result[];
abx_err abx__custom_result(const abx_param *fields, abx_reply *r);
void abx__ext_pydir_remove(abx_ext *e);

#endif
