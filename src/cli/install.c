/* install.c — `abx install --check`: the requirements abx ships manifests for, whether
 * each is installed under install.dir, and whether its tarball still hashes to the
 * manifest's integrity (docs/agents.md). Exit 1 when an installed one fails to verify. */
#include "cli/cli.h"
#include "config/config.h"
#include "server/server.h"
#include "sandbox/install.h"
#include <stdio.h>
#include <string.h>

int abx_cli_install(int argc, char **argv)
{
    const char *config = NULL, *dir = NULL;
    bool check = false, as_json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0)
            check = true;
        else if (strcmp(argv[i], "--json") == 0)
            as_json = true;
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else {
            fprintf(stderr, "usage: abx install --check [--config FILE] [--dir DIR] [--json]\n");
            return 2;
        }
    }
    if (!check) {
        fprintf(stderr, "abx install: requirements are installed by the first call that needs them "
                        "(install.allow); use --check to list and verify them\n");
        return 2;
    }
    abx_config cfg = {0};
    abx_diags d = {0};
    if (abx_config_load(&cfg, config, &d) != 0) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "%s:%d: %s: %s\n", config ? config : "-", d.items[i].line, d.items[i].code,
                    d.items[i].message);
        abx_diags_release(&d);
        return 1;
    }
    abx_diags_release(&d);
    char *where = dir ? abx_strdup(dir) : abx_install_dir_of(&cfg);
    bool ok = true;
    json_t *list = abx_install_check(where, &ok);
    if (as_json) {
        json_t *out = json_pack("{s:s, s:o, s:b}", "dir", where, "requirements", list, "ok", ok);
        char *s = json_dumps(out, JSON_INDENT(2));
        printf("%s\n", s);
        free(s);
        json_decref(out);
    } else {
        printf("install dir: %s\n", where);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            const char *state = !json_is_true(json_object_get(e, "installed")) ? "not installed"
                                : json_is_true(json_object_get(e, "verified")) ? "ok"
                                                                               : "FAILED";
            printf("%-12s %s@%s  %s\n", json_string_value(json_object_get(e, "name")),
                   json_string_value(json_object_get(e, "package")), json_string_value(json_object_get(e, "version")),
                   state);
            if (json_object_get(e, "error"))
                printf("             %s\n", json_string_value(json_object_get(e, "error")));
        }
        json_decref(list);
    }
    abx_free(where);
    abx_config_release(&cfg);
    return ok ? 0 : 1;
}
