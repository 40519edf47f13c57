/* fuzz_browser_ws.c — libFuzzer target for the WebSocket gate (src/builtin/browser_ws.c):
 * urls patterns become "scheme://host:port" bypass pairs, and a ws:/wss: URL a page names
 * (untrusted) is checked against them and the scope. Input: the URL's line, then pattern
 * lines. Invariants: each pair is "ws://" or "wss://" + a host with no '*', ';', ',' or
 * space (it goes on Chromium's command line) + ":" + a port; a URL admitted is admitted
 * by the scope as its http(s) twin. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/browser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char *lines[16];
    size_t n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < 16; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    if (n == 0) {
        free(text);
        return 0;
    }
    browser b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    b.urls = lines + 1;
    b.n_urls = n - 1;
    b.ws_pairs = abx_browser_ws_pairs(b.urls, b.n_urls);
    for (const char *p = b.ws_pairs ? strchr(b.ws_pairs, ';') : NULL; p; p = strchr(p + 1, ';')) {
        size_t len = strcspn(p + 1, ";");
        if (strncmp(p + 1, "ws://", 5) != 0 && strncmp(p + 1, "wss://", 6) != 0)
            abort();
        for (size_t i = 0; i < len; i++)
            if (strchr("*, \t", p[1 + i]))
                abort();
    }
    if (abx_browser_ws_admitted(&b, lines[0])) {
        bool tls = strncmp(lines[0], "wss://", 6) == 0;
        char *twin = abx_asprintf("%s%s", tls ? "https://" : "http://", lines[0] + (tls ? 6 : 5));
        if (!twin || !abx_browser_url_admitted(&b, twin))
            abort();
        abx_free(twin);
    }
    if (!abx_browser_ws_covered(&b))
        abort(); /* the scope the pairs came from covers them */
    abx_free(b.ws_pairs);
    pthread_mutex_destroy(&b.mu);
    free(text);
    return 0;
}
