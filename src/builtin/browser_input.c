/* browser_input.c — input into the active tab as a user would give it: a click is mouse
 * events at the element's centre (refs from the last browser.snapshot), typing is text
 * inserted into the focused element, keys are key events, scrolling is a wheel. An input
 * that starts a navigation waits for its load; blocked requests are listed. */
#include "builtin/browser.h"
#include <stdio.h>
#include <string.h>

static abx_err input_failed(abx_ctx *ctx, browser *b, abx_reply *r, abx_err code, const char *err)
{
    abx_browser_leave(ctx, b, NULL);
    return abx_reply_error(r, code, NULL, "%s", err);
}

static abx_err input_done(abx_ctx *ctx, browser *b, abx_reply *r, json_t *out)
{
    abx_browser_settle(b);
    abx_browser_leave(ctx, b, out);
    abx_reply_json(r, out);
    return ABX_OK;
}

/* "e12" → the backend node id of the last snapshot; -1 when unknown. */
static int64_t node_of(browser *b, const char *ref)
{
    if (!ref || ref[0] != 'e')
        return -1;
    char *end;
    unsigned long k = strtoul(ref + 1, &end, 10);
    if (*end || k < 1 || k > b->n_refs)
        return -1;
    return b->ref_nodes[k - 1];
}

static int mouse(browser *b, const char *type, double x, double y, char *err, size_t errlen)
{
    return abx_browser_call(b, "Input.dispatchMouseEvent",
                            json_pack("{s:s, s:f, s:f, s:s, s:i}", "type", type, "x", x, "y", y, "button", "left",
                                      "clickCount", 1),
                            NULL, err, errlen);
}

static abx_err browser_click(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    browser *b = abx_browser_enter(ctx, args, r);
    if (!b)
        return abx_reply_err(r);
    const char *ref = json_string_value(json_object_get(args, "ref"));
    int64_t node = node_of(b, ref);
    char err[300];
    if (node < 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_REF_NOT_FOUND, "no element with this ref: take a browser.snapshot");
    json_t *quads = NULL;
    abx_browser_call(b, "DOM.scrollIntoViewIfNeeded", json_pack("{s:I}", "backendNodeId", (json_int_t)node), NULL, err,
                     sizeof err);
    if (abx_browser_call(b, "DOM.getContentQuads", json_pack("{s:I}", "backendNodeId", (json_int_t)node), &quads, err,
                         sizeof err) != 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_REF_NOT_FOUND, err);
    json_t *q = json_array_get(json_object_get(quads, "quads"), 0);
    if (json_array_size(q) != 8) {
        json_decref(quads);
        return input_failed(ctx, b, r, ABX_E_BROWSER_REF_NOT_FOUND, "the element is not visible");
    }
    double x = 0, y = 0;
    for (size_t i = 0; i < 8; i += 2) {
        x += json_number_value(json_array_get(q, i)) / 4;
        y += json_number_value(json_array_get(q, i + 1)) / 4;
    }
    json_decref(quads);
    if (mouse(b, "mouseMoved", x, y, err, sizeof err) != 0 || mouse(b, "mousePressed", x, y, err, sizeof err) != 0 ||
        mouse(b, "mouseReleased", x, y, err, sizeof err) != 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_FAILED, err);
    return input_done(ctx, b, r, json_pack("{s:s, s:b}", "ref", ref, "clicked", 1));
}

typedef struct keydef {
    const char *key, *code, *text;
    int vk;
} keydef;

static const keydef KEYS[] = {
    {"Enter", "Enter", "\r", 13},        {"Tab", "Tab", NULL, 9},
    {"Escape", "Escape", NULL, 27},      {"Backspace", "Backspace", NULL, 8},
    {"Delete", "Delete", NULL, 46},      {"ArrowUp", "ArrowUp", NULL, 38},
    {"ArrowDown", "ArrowDown", NULL, 40}, {"ArrowLeft", "ArrowLeft", NULL, 37},
    {"ArrowRight", "ArrowRight", NULL, 39}, {"PageUp", "PageUp", NULL, 33},
    {"PageDown", "PageDown", NULL, 34},  {"Home", "Home", NULL, 36},
    {"End", "End", NULL, 35},            {"Space", "Space", " ", 32},
};

static int press_key(browser *b, const char *key, char *err, size_t errlen)
{
    keydef k = {0};
    char one[2] = "";
    for (size_t i = 0; i < ABX_ARRAY_LEN(KEYS); i++)
        if (strcmp(KEYS[i].key, key) == 0)
            k = KEYS[i];
    if (!k.key && strlen(key) == 1 && key[0] > 0x20 && key[0] < 0x7f) {
        one[0] = key[0];
        k = (keydef){one, "", one, (key[0] >= 'a' && key[0] <= 'z') ? key[0] - 32 : key[0]};
    }
    if (!k.key) {
        snprintf(err, errlen, "unknown key '%.40s' (Enter, Tab, Escape, Backspace, Delete, Arrow*, PageUp, PageDown, "
                              "Home, End, Space or one printable character)", key);
        return -2;
    }
    json_t *down = json_pack("{s:s, s:s, s:s, s:i}", "type", k.text ? "keyDown" : "rawKeyDown", "key",
                             strcmp(k.key, "Space") == 0 ? " " : k.key, "code", k.code, "windowsVirtualKeyCode", k.vk);
    if (k.text)
        json_object_set_new(down, "text", json_string(k.text));
    json_t *up = json_pack("{s:s, s:s, s:s, s:i}", "type", "keyUp", "key", strcmp(k.key, "Space") == 0 ? " " : k.key,
                           "code", k.code, "windowsVirtualKeyCode", k.vk);
    if (abx_browser_call(b, "Input.dispatchKeyEvent", down, NULL, err, errlen) != 0) {
        json_decref(up);
        return -1;
    }
    return abx_browser_call(b, "Input.dispatchKeyEvent", up, NULL, err, errlen);
}

static abx_err browser_type(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    browser *b = abx_browser_enter(ctx, args, r);
    if (!b)
        return abx_reply_err(r);
    const char *ref = json_string_value(json_object_get(args, "ref"));
    int64_t node = node_of(b, ref);
    char err[300];
    if (node < 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_REF_NOT_FOUND, "no element with this ref: take a browser.snapshot");
    if (abx_browser_call(b, "DOM.focus", json_pack("{s:I}", "backendNodeId", (json_int_t)node), NULL, err, sizeof err) != 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_REF_NOT_FOUND, err);
    if (abx_browser_call(b, "Input.insertText", json_pack("{s:O}", "text", json_object_get(args, "text")), NULL, err,
                         sizeof err) != 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_FAILED, err);
    bool submit = json_is_true(json_object_get(args, "submit"));
    if (submit && press_key(b, "Enter", err, sizeof err) != 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_FAILED, err);
    return input_done(ctx, b, r, json_pack("{s:s, s:b, s:b}", "ref", ref, "typed", 1, "submitted", submit));
}

static abx_err browser_press(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    browser *b = abx_browser_enter(ctx, args, r);
    if (!b)
        return abx_reply_err(r);
    const char *key = json_string_value(json_object_get(args, "key"));
    char err[300];
    int rc = press_key(b, key, err, sizeof err);
    if (rc != 0)
        return input_failed(ctx, b, r, rc == -2 ? ABX_E_ARGS_INVALID : ABX_E_BROWSER_FAILED, err);
    return input_done(ctx, b, r, json_pack("{s:s, s:b}", "key", key, "pressed", 1));
}

static abx_err browser_scroll(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    browser *b = abx_browser_enter(ctx, args, r);
    if (!b)
        return abx_reply_err(r);
    char err[300];
    json_t *got = NULL;
    if (abx_browser_call(b, "Input.dispatchMouseEvent",
                         json_pack("{s:s, s:i, s:i, s:I, s:I}", "type", "mouseWheel", "x", 100, "y", 100, "deltaX",
                                   json_integer_value(json_object_get(args, "dx")), "deltaY",
                                   json_integer_value(json_object_get(args, "dy"))),
                         NULL, err, sizeof err) != 0 ||
        abx_browser_call(b, "Runtime.evaluate",
                         json_pack("{s:s, s:b, s:b}", "expression",
                                   "new Promise(r => requestAnimationFrame(() => r([scrollX, scrollY])))",
                                   "returnByValue", 1, "awaitPromise", 1),
                         &got, err, sizeof err) != 0)
        return input_failed(ctx, b, r, ABX_E_BROWSER_FAILED, err);
    json_t *v = json_object_get(json_object_get(got, "result"), "value");
    json_t *out = json_pack("{s:O?, s:O?}", "x", json_array_get(v, 0), "y", json_array_get(v, 1));
    json_decref(got);
    return input_done(ctx, b, r, out);
}

static const abx_param ref_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Browser id"},
    {"ref", ABX_T_STRING, .required = true, .doc = "An element's ref from the last browser.snapshot (e3)"},
    {0},
};
static const abx_param type_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Browser id"},
    {"ref", ABX_T_STRING, .required = true, .doc = "The field's ref from the last browser.snapshot"},
    {"text", ABX_T_STRING, .required = true, .doc = "Text inserted at the caret"},
    {"submit", ABX_T_BOOL, .dflt = "false", .doc = "Press Enter afterwards"},
    {0},
};
static const abx_param press_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Browser id"},
    {"key", ABX_T_STRING, .required = true, .doc = "Enter, Tab, Escape, Backspace, Delete, ArrowUp/Down/Left/Right, "
                                                   "PageUp, PageDown, Home, End, Space or one printable character"},
    {0},
};
static const abx_param scroll_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Browser id"},
    {"dx", ABX_T_INT, ABX_RANGE(-100000, 100000), .dflt = "0", .doc = "Pixels right"},
    {"dy", ABX_T_INT, ABX_RANGE(-100000, 100000), .dflt = "0", .doc = "Pixels down"},
    {0},
};

static const abx_param download_fields[] = {ABX_BROWSER_DOWNLOAD_FIELDS, {0}};
static const abx_param click_result[] = {
    {"ref", ABX_T_STRING, .required = true}, {"clicked", ABX_T_BOOL, .required = true},
    ABX_BROWSER_LEAVE_ROWS(download_fields), {0}};
static const abx_param type_result[] = {
    {"ref", ABX_T_STRING, .required = true}, {"typed", ABX_T_BOOL, .required = true},
    {"submitted", ABX_T_BOOL, .required = true, .doc = "Enter was pressed"},
    ABX_BROWSER_LEAVE_ROWS(download_fields), {0}};
static const abx_param press_result[] = {
    {"key", ABX_T_STRING, .required = true}, {"pressed", ABX_T_BOOL, .required = true},
    ABX_BROWSER_LEAVE_ROWS(download_fields), {0}};
static const abx_param scroll_result[] = {
    {"x", ABX_T_NUMBER, .required = true, .nullable = true, .doc = "scrollX after it"},
    {"y", ABX_T_NUMBER, .required = true, .nullable = true, .doc = "scrollY after it"},
    ABX_BROWSER_LEAVE_ROWS(download_fields), {0}};

#define INPUT_ERRORS "browser.not_found browser.died browser.scope_changed browser.failed browser.ref_not_found"

const abx_op_def abx_browser_input_ops[] = {
    {.id = "browser.click", .result = click_result, .effects = ABX_EFF_NET | ABX_EFF_WRITE, .summary = "Click an element (a snapshot ref).",
     .http = {"POST /browser/{id}/click"}, .params = ref_params, .since = "0.3", .errors = INPUT_ERRORS,
     .handler = browser_click},
    {.id = "browser.type", .result = type_result, .effects = ABX_EFF_NET | ABX_EFF_WRITE,
     .summary = "Type into an element (a snapshot ref), optionally pressing Enter.", .http = {"POST /browser/{id}/type"},
     .params = type_params, .since = "0.3", .errors = INPUT_ERRORS, .handler = browser_type},
    {.id = "browser.press", .result = press_result, .effects = ABX_EFF_NET | ABX_EFF_WRITE, .summary = "Press a key in the active tab.",
     .http = {"POST /browser/{id}/press"}, .params = press_params, .since = "0.3",
     .errors = "browser.not_found browser.died browser.scope_changed browser.failed", .handler = browser_press},
    {.id = "browser.scroll", .result = scroll_result, .effects = ABX_EFF_NET | ABX_EFF_WRITE, .summary = "Scroll the active tab by dx, dy pixels.",
     .http = {"POST /browser/{id}/scroll"}, .params = scroll_params, .since = "0.3",
     .errors = "browser.not_found browser.died browser.scope_changed browser.failed", .handler = browser_scroll},
    {0},
};
