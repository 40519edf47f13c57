/* browser_guard.c — the url scope on every request the browser makes. The browser is
 * auto-attached (flatten) with waitForDebuggerOnStart, so each new target — a tab, a popup,
 * an out-of-process iframe, a worker, a service worker — starts paused. On attach abx turns
 * on auto-attach for the target's own children, then the Fetch domain for every URL, and
 * only when the browser has confirmed both lets the target run. Every request then pauses in
 * Fetch.requestPaused (each redirect hop is its own pause) and is continued only when its URL
 * is canonical and matches the scope; anything else fails as BlockedByClient and is kept to
 * be recorded under the call. A target whose Fetch cannot be enabled is never resumed (a
 * dedicated worker is the exception: its requests pause in its page's Fetch). */
#include "builtin/browser.h"
#include "policy/url.h"
#include <stdio.h>
#include <string.h>

#define GUARD_STEP_MS 10000

bool abx_browser_url_admitted(browser *b, const char *url)
{
    char err[200];
    char *cu = abx_url_canon(url, err, sizeof err); /* file:, data:, chrome:, javascript: ... never parse */
    if (!cu)
        return false;
    bool ok = false;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->n_urls && !ok; i++)
        ok = abx_url_match(b->urls[i], cu);
    pthread_mutex_unlock(&b->mu);
    abx_free(cu);
    return ok;
}

static btarget *target_by_session(browser *b, const char *session)
{
    for (btarget *t = b->targets; t; t = t->next)
        if (session && strcmp(t->session, session) == 0)
            return t;
    return NULL;
}

static json_t *auto_attach_params(void)
{
    return json_pack("{s:b, s:b, s:b}", "autoAttach", 1, "waitForDebuggerOnStart", 1, "flatten", 1);
}

/* The attach chain, one continuation per step: the session id travels as the argument. */
static void step_resumed(void *ud, void *arg, const char *session, json_t *result, json_t *error)
{
    (void)session, (void)result, (void)error;
    browser *b = ud;
    pthread_mutex_lock(&b->mu);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    abx_free(arg);
}

static void resume(browser *b, char *sid)
{
    pthread_mutex_lock(&b->mu);
    btarget *t = target_by_session(b, sid);
    if (t)
        t->guarded = true;
    bool page = t && strcmp(t->type, "page") == 0;
    pthread_mutex_unlock(&b->mu);
    if (page) { /* lifecycle events tell navigate when a load is done */
        /* every tab — the first, a popup, a target=_blank link — gets the viewport before it
         * runs (the headless window's frame would take its height otherwise) */
        abx_cdp_send(b->cdp, sid, "Emulation.setDeviceMetricsOverride",
                     json_pack("{s:i, s:i, s:i, s:b}", "width", b->width, "height", b->height, "deviceScaleFactor", 1,
                               "mobile", 0),
                     NULL, NULL);
        abx_cdp_send(b->cdp, sid, "Page.enable", NULL, NULL, NULL);
        abx_cdp_send(b->cdp, sid, "Page.setLifecycleEventsEnabled", json_pack("{s:b}", "enabled", 1), NULL, NULL);
    }
    /* every target: a page's, an iframe's or a worker's WebSockets are named in its own
     * Network.webSocketCreated (browser_ws.c) */
    abx_cdp_send(b->cdp, sid, "Network.enable", json_pack("{s:i}", "maxTotalBufferSize", 0), NULL, NULL);
    if (abx_cdp_send(b->cdp, sid, "Runtime.runIfWaitingForDebugger", NULL, step_resumed, sid) != 0)
        abx_free(sid);
}

static void step_fetch(void *ud, void *arg, const char *session, json_t *result, json_t *error)
{
    (void)session;
    browser *b = ud;
    char *sid = arg;
    pthread_mutex_lock(&b->mu);
    btarget *t = target_by_session(b, sid);
    bool worker = t && strcmp(t->type, "worker") == 0;
    pthread_mutex_unlock(&b->mu);
    if (result || (error && worker)) {
        resume(b, sid);
        return;
    }
    /* no interception on this target: it stays paused, and is closed */
    if (t)
        abx_cdp_send(b->cdp, NULL, "Target.closeTarget", json_pack("{s:s}", "targetId", t->target), NULL, NULL);
    abx_free(sid);
}

static void step_children(void *ud, void *arg, const char *session, json_t *result, json_t *error)
{
    (void)session, (void)result, (void)error; /* a worker has no children to attach: go on */
    browser *b = ud;
    char *sid = arg;
    json_t *p = json_pack("{s:[{s:s, s:s}], s:b}", "patterns", "urlPattern", "*", "requestStage", "Request",
                          "handleAuthRequests", 0);
    if (abx_cdp_send(b->cdp, sid, "Fetch.enable", p, step_fetch, sid) != 0)
        abx_free(sid);
}

static void on_attached(browser *b, json_t *params)
{
    const char *sid = json_string_value(json_object_get(params, "sessionId"));
    json_t *info = json_object_get(params, "targetInfo");
    const char *tid = json_string_value(json_object_get(info, "targetId"));
    const char *type = json_string_value(json_object_get(info, "type"));
    if (!sid || !tid || !type || strlen(sid) >= BROWSER_SID_LEN || strlen(tid) >= BROWSER_SID_LEN)
        return;
    btarget *t = abx_calloc(1, sizeof *t);
    char *arg = abx_strdup(sid);
    if (!t || !arg) {
        abx_free(t);
        abx_free(arg);
        return;
    }
    snprintf(t->session, sizeof t->session, "%s", sid);
    snprintf(t->target, sizeof t->target, "%s", tid);
    snprintf(t->type, sizeof t->type, "%s", type);
    pthread_mutex_lock(&b->mu);
    t->next = b->targets;
    b->targets = t;
    pthread_mutex_unlock(&b->mu);
    if (abx_cdp_send(b->cdp, sid, "Target.setAutoAttach", auto_attach_params(), step_children, arg) != 0)
        abx_free(arg);
}

static void on_detached(browser *b, json_t *params)
{
    const char *sid = json_string_value(json_object_get(params, "sessionId"));
    pthread_mutex_lock(&b->mu);
    for (btarget **pp = &b->targets; *pp; pp = &(*pp)->next)
        if (sid && strcmp((*pp)->session, sid) == 0) {
            btarget *t = *pp;
            *pp = t->next;
            if (strcmp(b->active, t->session) == 0)
                b->active[0] = '\0';
            abx_free(t);
            break;
        }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void add_blocked(browser *b, const char *url, const char *kind)
{
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_t *e = json_pack("{s:s%, s:s, s:s}", "url", url ? url : "", url ? strnlen(url, 2048) : 0, "resource",
                          kind ? kind : "Other", "at", at); /* a URL is kept to 2 KiB */
    pthread_mutex_lock(&b->mu);
    if (e && json_array_size(b->blocked) < 1000)
        json_array_append(b->blocked, e);
    pthread_mutex_unlock(&b->mu);
    json_decref(e);
}

static void on_paused(browser *b, const char *session, json_t *params)
{
    const char *rid = json_string_value(json_object_get(params, "requestId"));
    const char *url = json_string_value(json_object_get(json_object_get(params, "request"), "url"));
    const char *kind = json_string_value(json_object_get(params, "resourceType"));
    if (!rid)
        return;
    if (url && abx_browser_url_admitted(b, url)) {
        abx_cdp_send(b->cdp, session, "Fetch.continueRequest", json_pack("{s:s}", "requestId", rid), NULL, NULL);
        return;
    }
    abx_cdp_send(b->cdp, session, "Fetch.failRequest",
                 json_pack("{s:s, s:s}", "requestId", rid, "errorReason", "BlockedByClient"), NULL, NULL);
    add_blocked(b, url, kind);
}

static void on_lifecycle(browser *b, const char *session, json_t *params)
{
    const char *frame = json_string_value(json_object_get(params, "frameId"));
    const char *loader = json_string_value(json_object_get(params, "loaderId"));
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!frame || !loader || !name)
        return;
    pthread_mutex_lock(&b->mu);
    btarget *t = target_by_session(b, session);
    if (t && strcmp(t->target, frame) == 0) { /* the main frame's id is the target's */
        if (strcmp(t->loader, loader) != 0 || strcmp(name, "init") == 0) {
            snprintf(t->loader, sizeof t->loader, "%.*s", (int)sizeof t->loader - 1, loader);
            t->dcl = t->load = t->idle = false;
        }
        if (strcmp(name, "DOMContentLoaded") == 0)
            t->dcl = true;
        else if (strcmp(name, "load") == 0)
            t->load = t->dcl = true;
        else if (strcmp(name, "networkIdle") == 0)
            t->idle = true;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

void abx_browser_on_event(void *ud, const char *method, const char *session, json_t *params)
{
    browser *b = ud;
    if (strcmp(method, "Fetch.requestPaused") == 0)
        on_paused(b, session, params);
    else if (strcmp(method, "Target.attachedToTarget") == 0)
        on_attached(b, params);
    else if (strcmp(method, "Target.detachedFromTarget") == 0)
        on_detached(b, params);
    else if (strncmp(method, "Browser.download", 16) == 0 && !session)
        abx_browser_on_download(b, method, params);
    else if (strcmp(method, "Network.webSocketCreated") == 0) { /* the gate is the proxy rule (browser_ws.c) */
        const char *url = json_string_value(json_object_get(params, "url"));
        if (!abx_browser_ws_admitted(b, url))
            add_blocked(b, url, "WebSocket");
    }
    else if (strcmp(method, "Page.lifecycleEvent") == 0)
        on_lifecycle(b, session, params);
    else if (strcmp(method, "Fetch.authRequired") == 0) /* never answer a server's credential prompt */
        abx_cdp_send(b->cdp, session, "Fetch.continueWithAuth",
                     json_pack("{s:O?, s:{s:s}}", "requestId", json_object_get(params, "requestId"),
                               "authChallengeResponse", "response", "CancelAuth"),
                     NULL, NULL);
}

int abx_browser_guard_start(browser *b, char *err, size_t errlen)
{
    int64_t deadline = abx_now_ms() + GUARD_STEP_MS;
    return abx_cdp_call(b->cdp, NULL, "Target.setAutoAttach", auto_attach_params(), deadline, NULL, err, errlen);
}

bool abx_browser_wait_load(browser *b, const char *loader, bool other, const char *until, int64_t deadline)
{
    pthread_mutex_lock(&b->mu);
    bool ok = false;
    for (;;) {
        btarget *t = target_by_session(b, b->active);
        if (!t)
            break;
        bool same = !loader || (strcmp(t->loader, loader) == 0) != other;
        if (same && (strcmp(until, "commit") == 0 || (strcmp(until, "domcontentloaded") == 0 && t->dcl) ||
                     (strcmp(until, "load") == 0 && t->load) || (strcmp(until, "networkidle") == 0 && t->idle))) {
            ok = true;
            break;
        }
        int64_t left = deadline - abx_now_ms();
        if (left <= 0 || abx_cdp_closed(b->cdp))
            break;
        if (left > 100)
            left = 100;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + left * 1000000;
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
    return ok;
}

int abx_browser_call(browser *b, const char *method, json_t *params, json_t **result, char *err, size_t errlen)
{
    char sid[BROWSER_SID_LEN];
    pthread_mutex_lock(&b->mu);
    snprintf(sid, sizeof sid, "%s", b->active);
    pthread_mutex_unlock(&b->mu);
    if (!sid[0]) {
        json_decref(params);
        snprintf(err, errlen, "the browser has no open tab");
        return -1;
    }
    return abx_cdp_call(b->cdp, sid, method, params, abx_now_ms() + 30000, result, err, errlen);
}

void abx_browser_loader(browser *b, char *out)
{
    out[0] = '\0';
    pthread_mutex_lock(&b->mu);
    btarget *t = target_by_session(b, b->active);
    if (t)
        snprintf(out, BROWSER_SID_LEN, "%s", t->loader);
    pthread_mutex_unlock(&b->mu);
}

void abx_browser_settle(browser *b)
{
    char old[BROWSER_SID_LEN];
    abx_browser_loader(b, old);
    if (abx_browser_wait_load(b, old, true, "commit", abx_now_ms() + 300))
        abx_browser_wait_load(b, old, true, "load", abx_now_ms() + 15000);
}
