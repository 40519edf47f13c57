/* console.h — the web console's static files at /ui on the main listener (docs/console.md).
 * The files are embedded at build time from console/dist (a generated table; empty when
 * the console was not built, and then /ui answers 404 with a hint). */
#ifndef ABX_SERVER_CONSOLE_H
#define ABX_SERVER_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct abx_console_asset {
    const char *name;           /* path below /ui/, e.g. "index.html", "app.js" */
    const char *etag;           /* "\"<sha256 prefix>\"" of the content */
    const unsigned char *data;
    size_t len;
} abx_console_asset;

/* the generated table (build/generated/console_assets.c) */
extern const abx_console_asset abx_console_assets[];
extern const size_t abx_console_n_assets;

typedef struct abx_console_answer {
    int status;                 /* 200, 304, 308, 404, 405 */
    const char *content_type;
    const unsigned char *body;  /* borrowed (the table or a static string) */
    size_t len;
    const char *etag;           /* NULL when none */
    const char *location;       /* 308 only */
} abx_console_answer;

/* Whether a request path (not NUL-terminated) is the console's: "/ui" or "/ui/...". */
bool abx_console_path(const char *path, size_t len);
/* What to answer for method and path from the table tab[0..n) (pure: no I/O). */
void abx_console_answer_for(const abx_console_asset *tab, size_t n, const char *method, const char *path,
                            size_t len, const char *if_none_match, abx_console_answer *out);
/* The security headers every console answer carries, as NULL-terminated name/value pairs. */
extern const char *const abx_console_headers[];
/* Answer a console request on a libmicrohttpd connection (an enum MHD_Result). */
struct MHD_Connection;
int abx_console_queue(struct MHD_Connection *c, const char *method, const char *path, size_t len);

#endif
