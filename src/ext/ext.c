/* ext.c — the extension state of a server: reads `custom:` and `load:` from the
 * config, hands each entry to its loader (custom.c, plugin.c, pyworker.c), keeps
 * what must outlive the registry (declarations, dlopen handles, workers) and answers
 * a reload that changed them. Only what the config names is ever loaded. */
#include "ext/ext.h"
#include "core/yaml.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void abx__ext_origin(abx_ext *e, const char *id, int line)
{
    if (e->n_origins == e->cap_origins) {
        size_t cap = e->cap_origins ? e->cap_origins * 2 : 16;
        struct ext_origin *g = abx_arena_alloc(e->arena, cap * sizeof *g);
        if (!g)
            return;
        if (e->n_origins)
            memcpy(g, e->origins, e->n_origins * sizeof *g);
        e->origins = g;
        e->cap_origins = cap;
    }
    e->origins[e->n_origins++] = (struct ext_origin){abx_arena_strdup(e->arena, id), line};
}

int abx_ext_line_of(const abx_ext *e, const char *id)
{
    for (size_t i = 0; e && i < e->n_origins; i++)
        if (strcmp(e->origins[i].id, id) == 0)
            return e->origins[i].line;
    return 0;
}

static json_t *declared_of(const abx_config *cfg)
{
    return json_pack("{s:O?, s:O?, s:s?, s:s?, s:b}", "custom", cfg->custom, "load", cfg->load, "plugin_dir",
                     cfg->plugin_dir, "python", cfg->python, "per_call", cfg->python_per_call);
}

abx_ext *abx_ext_load(abx_registry *reg, const abx_config *cfg, const char *workspace, abx_diags *d)
{
    abx_ext *e = abx_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->arena = abx_arena_new();
    e->declared = declared_of(cfg);
    if (!e->arena || !e->declared) {
        abx_ext_free(e);
        return NULL;
    }
    abx__ext_custom_load(e, reg, cfg, workspace, d);
    const json_t *load = cfg->load;
    if (load && !json_is_array(load)) {
        abx_diag_add(d, "error", "config.invalid", cfg->lines ? abx_linemap_line(cfg->lines, load) : 0,
                     "'load' must be a list of module names");
        return e;
    }
    size_t i;
    json_t *it;
    json_array_foreach(load, i, it)
    {
        int line = cfg->lines ? abx_linemap_line(cfg->lines, it) : 0;
        const char *name = json_string_value(it);
        if (!name || !*name) {
            abx_diag_add(d, "error", "config.invalid", line, "load[%zu] must be a module name", i);
            continue;
        }
        if (strncmp(name, "python:", 7) == 0)
            abx__ext_python_load(e, reg, cfg, name + 7, line, d);
        else
            abx__ext_plugin_load(e, reg, cfg, name, line, d);
    }
    return e;
}

void abx_ext_free(abx_ext *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n_workers; i++)
        abx__pyworker_free(e->workers[i]);
    abx_free(e->workers);
    abx__ext_pydir_remove(e);
    for (size_t i = 0; i < e->n_handles; i++)
        dlclose(e->handles[i]);
    abx_free(e->handles);
    json_decref(e->declared);
    abx_arena_free(e->arena);
    abx_free(e);
}

void abx_ext_reload_check(const abx_ext *e, const abx_config *fresh, abx_diags *d)
{
    json_t *now = declared_of(fresh);
    if (e && now && !json_equal(now, e->declared))
        abx_diag_add(d, "warning", "config.restart_required", 0,
                     "custom:, load:, plugin_dir or python changed; operations are registered once, when the server "
                     "starts, so the ones in force stay as they were until the next start (the policy is reloaded)");
    json_decref(now);
}
