/* e2b_fs.c — envd's filesystem.Filesystem as alternate bindings of files.*: Stat →
 * files.stat, MakeDir → files.mkdir, Move → files.move, ListDir → files.list (depth
 * from its recursive walk), Remove → files.delete. The policy sees the same paths it
 * sees on abx's own routes; a path outside the caller's scope is the same not_found. */
#include "doors/e2b.h"
#include "filesystem/filesystem.pb-c.h"
#include <stdlib.h>
#include <string.h>

static const char *file_type(const char *t)
{
    if (!t)
        return "FILE_TYPE_UNSPECIFIED";
    if (strcmp(t, "directory") == 0)
        return "FILE_TYPE_DIRECTORY";
    if (strcmp(t, "symlink") == 0)
        return "FILE_TYPE_SYMLINK";
    return "FILE_TYPE_FILE";
}

/* envd's EntryInfo from abx's stat fields (files_stat_json's shape) */
json_t *abx_e2b_entry_of(const char *path, const json_t *st)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash && slash[1] ? slash + 1 : path;
    const char *type = json_string_value(json_object_get(st, "type"));
    const char *mode_s = json_string_value(json_object_get(st, "mode"));
    unsigned mode = mode_s ? (unsigned)strtoul(mode_s, NULL, 8) : 0;
    bool dir = type && strcmp(type, "directory") == 0;
    char perms[11] = "----------";
    static const char rwx[] = "rwxrwxrwx";
    perms[0] = dir ? 'd' : type && strcmp(type, "symlink") == 0 ? 'L' : '-';
    for (int i = 0; i < 9; i++)
        if (mode & (0400u >> i))
            perms[i + 1] = rwx[i];
    char size[32];
    snprintf(size, sizeof size, "%lld", (long long)json_integer_value(json_object_get(st, "size")));
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s}", "name", name, "type", file_type(type), "path", path,
                          "size", size, "mode", (int)(mode | (dir ? 040000u : 0100000u)), "permissions", perms);
    const char *mtime = json_string_value(json_object_get(st, "mtime"));
    if (e && mtime)
        json_object_set_new(e, "modifiedTime", json_string(mtime));
    return e;
}

json_t *abx_e2b_entry(e2b_call *c, const char *path, int *status, json_t **body)
{
    *status = abx_e2b_op(c, "files.stat", json_pack("{s:s}", "path", path), body);
    if (*status != 200)
        return NULL;
    if (!json_is_true(json_object_get(*body, "exists"))) {
        json_decref(*body);
        *body = abx_error_json(ABX_E_FILES_NOT_FOUND, "the path does not exist", NULL);
        *status = 404;
        return NULL;
    }
    const char *canon = json_string_value(json_object_get(*body, "path"));
    json_t *e = abx_e2b_entry_of(canon ? canon : path, *body);
    json_decref(*body);
    *body = NULL;
    return e;
}

/* Answer {entry: EntryInfo of path} */
static void answer_entry(e2b_call *c, const ProtobufCMessageDescriptor *out, const char *path)
{
    int st;
    json_t *body;
    json_t *e = abx_e2b_entry(c, path, &st, &body);
    if (!e) {
        abx_e2b_fail(c, st, body);
        json_decref(body);
        return;
    }
    abx_e2b_unary(c, out, json_pack("{s:o}", "entry", e));
}

static const char *path_of(const json_t *req, const char *key)
{
    const char *p = json_string_value(json_object_get(req, key));
    return p ? p : "";
}

static void fs_stat(e2b_call *c, const json_t *req)
{
    answer_entry(c, &filesystem__stat_response__descriptor, path_of(req, "path"));
}

static bool run_or_fail(e2b_call *c, const char *op, json_t *args)
{
    json_t *body;
    int st = abx_e2b_op(c, op, args, &body);
    if (st >= 300)
        abx_e2b_fail(c, st, body);
    json_decref(body);
    return st < 300;
}

static void fs_make_dir(e2b_call *c, const json_t *req)
{
    const char *p = path_of(req, "path");
    int st;
    json_t *body;
    json_t *e = abx_e2b_entry(c, p, &st, &body);
    json_decref(body);
    if (e) { /* envd: an existing directory is already_exists (the SDK answers false) */
        json_decref(e);
        abx_e2b_fail_msg(c, ABX_E_FILES_EXISTS, "the directory already exists");
        return;
    }
    if (run_or_fail(c, "files.mkdir", json_pack("{s:s, s:b}", "path", p, "parents", 1)))
        answer_entry(c, &filesystem__make_dir_response__descriptor, p);
}

static void fs_move(e2b_call *c, const json_t *req)
{
    const char *dst = path_of(req, "destination");
    if (run_or_fail(c, "files.move", json_pack("{s:s, s:s}", "src", path_of(req, "source"), "dst", dst)))
        answer_entry(c, &filesystem__move_response__descriptor, dst);
}

static void fs_remove(e2b_call *c, const json_t *req)
{
    if (run_or_fail(c, "files.delete", json_pack("{s:s, s:b}", "path", path_of(req, "path"), "recursive", 1)))
        abx_e2b_unary(c, &filesystem__remove_response__descriptor, json_object());
}

static void fs_list_dir(e2b_call *c, const json_t *req)
{
    const char *p = path_of(req, "path");
    json_int_t depth = json_integer_value(json_object_get(req, "depth"));
    if (depth <= 0)
        depth = 1;
    json_t *body;
    int st = abx_e2b_op(c, "files.list", json_pack("{s:s, s:b}", "path", p, "recursive", depth > 1), &body);
    if (st != 200) {
        abx_e2b_fail(c, st, body);
        json_decref(body);
        return;
    }
    const char *root = json_string_value(json_object_get(body, "path"));
    json_t *entries = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(body, "entries"), i, e) {
        const char *rel = json_string_value(json_object_get(e, "path"));
        if (!rel)
            continue;
        json_int_t d = 1;
        for (const char *q = rel; *q; q++)
            d += *q == '/';
        if (d > depth)
            continue;
        char *full = abx_asprintf("%s/%s", root ? root : p, rel);
        if (full)
            json_array_append_new(entries, abx_e2b_entry_of(full, e));
        abx_free(full);
    }
    json_decref(body);
    abx_e2b_unary(c, &filesystem__list_dir_response__descriptor, json_pack("{s:o}", "entries", entries));
}

static void create_watcher(e2b_call *c, const json_t *req) { abx_e2b_watcher_call(c, req, 0); }
static void get_watcher_events(e2b_call *c, const json_t *req) { abx_e2b_watcher_call(c, req, 1); }
static void remove_watcher(e2b_call *c, const json_t *req) { abx_e2b_watcher_call(c, req, 2); }

const e2b_method abx_e2b_fs_methods[] = {
    {"/filesystem.Filesystem/Stat", &filesystem__stat_request__descriptor, &filesystem__stat_response__descriptor,
     false, fs_stat},
    {"/filesystem.Filesystem/MakeDir", &filesystem__make_dir_request__descriptor,
     &filesystem__make_dir_response__descriptor, false, fs_make_dir},
    {"/filesystem.Filesystem/Move", &filesystem__move_request__descriptor, &filesystem__move_response__descriptor,
     false, fs_move},
    {"/filesystem.Filesystem/ListDir", &filesystem__list_dir_request__descriptor,
     &filesystem__list_dir_response__descriptor, false, fs_list_dir},
    {"/filesystem.Filesystem/Remove", &filesystem__remove_request__descriptor,
     &filesystem__remove_response__descriptor, false, fs_remove},
    {"/filesystem.Filesystem/WatchDir", &filesystem__watch_dir_request__descriptor,
     &filesystem__watch_dir_response__descriptor, true, abx_e2b_watch_dir},
    {"/filesystem.Filesystem/CreateWatcher", &filesystem__create_watcher_request__descriptor,
     &filesystem__create_watcher_response__descriptor, false, create_watcher},
    {"/filesystem.Filesystem/GetWatcherEvents", &filesystem__get_watcher_events_request__descriptor,
     &filesystem__get_watcher_events_response__descriptor, false, get_watcher_events},
    {"/filesystem.Filesystem/RemoveWatcher", &filesystem__remove_watcher_request__descriptor,
     &filesystem__remove_watcher_response__descriptor, false, remove_watcher},
    {NULL, NULL, NULL, false, NULL},
};
