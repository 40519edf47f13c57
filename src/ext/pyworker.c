/* pyworker.c — Python op workers (load: ["python:pkg.mod"]). */
#include "ext/ext.h"

int abx__ext_python_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *module, int line,
                         abx_diags *d)
{
    (void)e;
    (void)reg;
    (void)cfg;
    abx_diag_add(d, "error", "config.unsupported", line, "python op workers ('python:%s') are not supported yet",
                 module);
    return -1;
}

void abx__pyworker_free(abx_pyworker *w) { (void)w; }

int abx_ext_workers_start(struct abx_server *s, const void *policy, char *err, size_t errlen)
{
    (void)s;
    (void)policy;
    (void)err;
    (void)errlen;
    return 0;
}
