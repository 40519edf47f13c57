/* console.c — the web console's static files at /ui (docs/console.md): the embedded
 * table looked up by exact name, answered with an ETag (304 on a match), Cache-Control:
 * no-cache (revalidate every time: the file names carry no hash) and the console's strict
 * security headers. Static files need no principal: every call the console makes goes to
 * the ops with the token the operator typed, through the same pipeline as any client. */
#include "server/console.h"
#include <microhttpd.h>
#include <string.h>

/* xterm.js writes its theme into a <style> element and sets element styles, hence
 * 'unsafe-inline' for style-src only; scripts only from /ui itself. Kernel HTML outputs
 * are shown in an iframe with sandbox="" and srcdoc (no script, a unique origin). */
const char *const abx_console_headers[] = {
    "Content-Security-Policy",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-src 'self' about:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options", "nosniff",
    "X-Frame-Options", "DENY",
    "Referrer-Policy", "no-referrer",
    "Cross-Origin-Opener-Policy", "same-origin",
    "Cache-Control", "no-cache",
    NULL,
};

static const char NOT_BUILT[] =
    "The web console was not built into this abx.\n"
    "Build it with: (cd console && npm ci && npm run build), then rebuild abx (cmake --build build);\n"
    "see docs/console.md. The API works without it.\n";
static const char NO_FILE[] = "No such file in the web console.\n";
static const char NO_METHOD[] = "The web console's files answer GET and HEAD only.\n";

bool abx_console_path(const char *path, size_t len)
{
    return len >= 3 && memcmp(path, "/ui", 3) == 0 && (len == 3 || path[3] == '/');
}

static const char *type_of(const char *name)
{
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
        {".png", "image/png"},                 {".json", "application/json"},
        {".woff2", "font/woff2"},              {".ico", "image/x-icon"},
        {".map", "application/json"},          {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

static void text(abx_console_answer *out, int status, const char *msg)
{
    out->status = status;
    out->content_type = "text/plain; charset=utf-8";
    out->body = (const unsigned char *)msg;
    out->len = strlen(msg);
}

/* does an If-None-Match list name etag (or say "*")? */
static bool etag_matches(const char *inm, const char *etag)
{
    if (!inm)
        return false;
    size_t el = strlen(etag);
    for (const char *p = inm; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        if (strncmp(p, etag, el) == 0 && (p[el] == '\0' || p[el] == ',' || p[el] == ' '))
            return true;
        while (*p && *p != ',')
            p++;
    }
    return false;
}

void abx_console_answer_for(const abx_console_asset *tab, size_t n, const char *method, const char *path,
                            size_t len, const char *if_none_match, abx_console_answer *out)
{
    memset(out, 0, sizeof *out);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return text(out, 405, NO_METHOD);
    if (n == 0)
        return text(out, 404, NOT_BUILT);
    if (len == 3) { /* /ui → /ui/ so that the page's relative URLs resolve below it */
        out->status = 308;
        out->location = "/ui/";
        return text(out, 308, "/ui/\n");
    }
    const char *name = path + 4;
    size_t nlen = len - 4;
    if (nlen == 0) {
        name = "index.html";
        nlen = strlen(name);
    }
    for (size_t i = 0; i < n; i++) {
        if (strlen(tab[i].name) != nlen || memcmp(tab[i].name, name, nlen) != 0)
            continue;
        out->etag = tab[i].etag;
        out->content_type = type_of(tab[i].name);
        if (etag_matches(if_none_match, tab[i].etag)) {
            out->status = 304;
            return;
        }
        out->status = 200;
        out->body = tab[i].data;
        out->len = tab[i].len;
        return;
    }
    text(out, 404, NO_FILE);
}

int abx_console_queue(struct MHD_Connection *c, const char *method, const char *path, size_t len)
{
    abx_console_answer a;
    abx_console_answer_for(abx_console_assets, abx_console_n_assets, method, path, len,
                           MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match"), &a);
    struct MHD_Response *resp = MHD_create_response_from_buffer(a.status == 304 ? 0 : a.len, (void *)a.body,
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    for (size_t i = 0; abx_console_headers[i]; i += 2)
        MHD_add_response_header(resp, abx_console_headers[i], abx_console_headers[i + 1]);
    if (a.content_type && a.status != 304)
        MHD_add_response_header(resp, "Content-Type", a.content_type);
    if (a.etag)
        MHD_add_response_header(resp, "ETag", a.etag);
    if (a.location)
        MHD_add_response_header(resp, "Location", a.location);
    if (a.status == 405)
        MHD_add_response_header(resp, "Allow", "GET, HEAD");
    int rc = MHD_queue_response(c, (unsigned)a.status, resp);
    MHD_destroy_response(resp);
    return rc;
}
