/* fuzz_console.c — libFuzzer target for src/server/console.c (the /ui file table).
 *
 * The input is "METHOD\tPATH\tIF-NONE-MATCH" (missing parts empty). Whatever it is:
 *  - abx_console_path must accept exactly "/ui" and "/ui/..." (checked against a reference);
 *  - abx_console_answer_for answers one of 200, 304, 308, 404, 405, with a body inside
 *    the table or a static message of the stated length;
 *  - 200 and 304 name a file that is exactly "/ui/" + its name (or index.html for "/ui/"),
 *    and 304 only when If-None-Match holds that file's ETag (or "*");
 *  - anything but GET and HEAD is 405, and with an empty table nothing is 200. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/console.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned char A[] = "<!doctype html>", B[] = "x";
static const abx_console_asset TAB[] = {
    {"index.html", "\"1111\"", A, sizeof A - 1},
    {"app.js", "\"2222\"", B, sizeof B - 1},
};

static void check(bool ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1024)
        return 0;
    char *in = malloc(size + 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    char *method = in, *path = strchr(in, '\t'), *inm = NULL;
    if (path) {
        *path++ = '\0';
        inm = strchr(path, '\t');
        if (inm)
            *inm++ = '\0';
    } else {
        path = in + strlen(in);
    }
    size_t len = strlen(path);
    bool ref = len >= 3 && strncmp(path, "/ui", 3) == 0 && (len == 3 || path[3] == '/');
    check(abx_console_path(path, len) == ref);
    if (!ref) {
        free(in);
        return 0;
    }
    bool getlike = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    for (size_t n = 0; n <= 2; n += 2) {
        abx_console_answer a;
        abx_console_answer_for(n ? TAB : NULL, n, method, path, len, inm, &a);
        check(a.status == 200 || a.status == 304 || a.status == 308 || a.status == 404 || a.status == 405);
        if (!getlike)
            check(a.status == 405);
        if (a.status == 200 || a.status == 304) {
            check(n == 2);
            const char *want = len == 4 ? "index.html" : path + 4;
            const abx_console_asset *f = NULL;
            for (size_t i = 0; i < n; i++)
                if (strcmp(TAB[i].name, want) == 0)
                    f = &TAB[i];
            check(f != NULL && strcmp(a.etag, f->etag) == 0);
            if (a.status == 200)
                check(a.body == f->data && a.len == f->len);
            else
                check(inm && (strstr(inm, f->etag) || strchr(inm, '*')));
        } else if (a.status != 304) {
            check(a.body && a.len == strlen((const char *)a.body));
        }
    }
    free(in);
    return 0;
}
