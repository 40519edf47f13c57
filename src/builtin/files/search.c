/* search.c — files.search (lines that match, with context) and files.find (names that
 * match a glob), both over the walker (walk.h). */
#include "builtin/files/walk.h"
#include "builtin/files/results.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SEARCH_LINE_MAX 2000                   /* bytes of one line's text in a result */
#define SEARCH_OUTPUT_MAX (16LL * 1024 * 1024) /* text in one search answer */
#define BINARY_PROBE 8192                      /* a NUL in the first 8 KiB = binary */

/* ---- files.search ---- */

typedef struct search_st {
    bool use_re, icase;
    regex_t re;
    const char *pat;
    size_t plen;
    char *lpat;                 /* pattern folded to lower case (literal, case-insensitive) */
    const json_t *include, *exclude;
    int64_t before, after, max_results, max_file_size;
    json_t *results;
    bool truncated, stop;
    int64_t scanned, skipped, out_bytes;
    char *buf, *lbuf;
    size_t cap;
} search_st;

static json_t *line_text(search_st *st, const char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n > SEARCH_LINE_MAX)
        n = abx_utf8_complete_prefix(p, SEARCH_LINE_MAX);
    st->out_bytes += (int64_t)n + 16;
    return abx_text_json(p, n);
}

static bool line_matches(search_st *st, size_t off, size_t len)
{
    if (st->use_re) {
        regmatch_t m[1] = {{.rm_so = 0, .rm_eo = (regoff_t)len}};
        return regexec(&st->re, st->buf + off, 1, m, REG_STARTEND) == 0;
    }
    const char *hay = st->icase ? st->lbuf + off : st->buf + off;
    return memmem(hay, len, st->icase ? st->lpat : st->pat, st->plen) != NULL;
}

static void search_file(search_st *st, int fd, const struct stat *sb, const char *rel)
{
    if (sb->st_size > st->max_file_size) {
        st->skipped++;
        return;
    }
    size_t want = (size_t)sb->st_size + 1; /* one more: notice a file that grew */
    if (want > st->cap) {
        char *g = abx_realloc(st->buf, want + 1);
        if (!g) {
            st->skipped++;
            return;
        }
        st->buf = g;
        st->cap = want;
    }
    size_t n = 0;
    while (n < want) {
        ssize_t g = read(fd, st->buf + n, want - n);
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            break;
        n += (size_t)g;
    }
    st->buf[n] = '\0'; /* a bound for anything that reads the text as a C string */
    if ((int64_t)n > st->max_file_size || memchr(st->buf, '\0', n < BINARY_PROBE ? n : BINARY_PROBE)) {
        st->skipped++; /* binary (or grew past max_file_size) */
        return;
    }
    st->scanned++;
    if (st->icase && !st->use_re) {
        char *g = abx_realloc(st->lbuf, st->cap + 1);
        if (!g) {
            st->skipped++;
            return;
        }
        st->lbuf = g;
        for (size_t i = 0; i < n; i++)
            st->lbuf[i] = (char)tolower((unsigned char)st->buf[i]);
    }
    /* before: ring of the last lines; after: results still waiting for lines */
    size_t ring_off[101], ring_len[101];
    int64_t ring_n = 0, ring_head = 0;
    json_t *pend[101];
    int64_t pend_left[101];
    int npend = 0;
    int64_t lineno = 0;
    json_t *jrel = abx_text_json(rel, strlen(rel));
    for (size_t p = 0; p < n;) {
        const char *nl = memchr(st->buf + p, '\n', n - p);
        size_t end = nl ? (size_t)(nl - st->buf) : n;
        size_t len = end - p;
        lineno++;
        for (int i = 0; i < npend;) {
            json_array_append_new(json_object_get(pend[i], "after"), line_text(st, st->buf + p, len));
            if (--pend_left[i] == 0) {
                pend[i] = pend[--npend];
                pend_left[i] = pend_left[npend];
            } else {
                i++;
            }
        }
        if (!st->stop && line_matches(st, p, len)) {
            if ((int64_t)json_array_size(st->results) >= st->max_results || st->out_bytes > SEARCH_OUTPUT_MAX) {
                st->truncated = true;
                st->stop = true;
            } else {
                json_t *before = json_array();
                for (int64_t k = 0; k < ring_n; k++) {
                    int64_t idx = (ring_head - ring_n + k + st->before + 1) % (st->before + 1);
                    json_array_append_new(before, line_text(st, st->buf + ring_off[idx], ring_len[idx]));
                }
                json_t *res = json_pack("{s:O, s:I, s:o, s:o, s:o}", "path", jrel, "line", (json_int_t)lineno, "text",
                                        line_text(st, st->buf + p, len), "before", before, "after", json_array());
                if (res) {
                    json_array_append_new(st->results, res);
                    if (st->after > 0) {
                        pend[npend] = res;
                        pend_left[npend++] = st->after;
                    }
                }
            }
        }
        if (st->stop && npend == 0)
            break;
        if (st->before > 0) {
            ring_off[ring_head] = p;
            ring_len[ring_head] = len;
            ring_head = (ring_head + 1) % (st->before + 1);
            if (ring_n < st->before)
                ring_n++;
        }
        p = end + 1;
    }
    json_decref(jrel);
}

/* What search never reads, dropped before the policy is asked: symlinks and other
 * non-regular files, excluded directories (with all below them), and files that do not
 * pass include and exclude. */
static bool search_drops(const files_walk_entry *e, void *ud)
{
    const search_st *st = ud;
    if (S_ISDIR(e->st.st_mode))
        return files_glob_any(st->exclude, e->rel, e->name);
    return !S_ISREG(e->st.st_mode) || files_glob_any(st->exclude, e->rel, e->name) ||
           (json_array_size(st->include) && !files_glob_any(st->include, e->rel, e->name));
}

/* Each regular file the walker delivers (hidden names, the policy, depth and
 * cancellation are walk.h's) within max_file_size is read. */
static files_walk_step search_entry(files_walk *w, const files_walk_entry *e, void *ud)
{
    search_st *st = ud;
    (void)w;
    if (!S_ISREG(e->st.st_mode))
        return FILES_WALK_NEXT;
    if (e->st.st_size > st->max_file_size) {
        st->skipped++;
        return FILES_WALK_NEXT;
    }
    int fd = openat(e->dirfd, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat now;
    if (fd >= 0 && fstat(fd, &now) == 0 && S_ISREG(now.st_mode)) {
        files_clear_nonblock(fd);
        search_file(st, fd, &now, e->rel);
    }
    if (fd >= 0)
        close(fd);
    return st->stop ? FILES_WALK_STOP : FILES_WALK_NEXT;
}

static abx_err files_search(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
    search_st st = {
        .use_re = json_is_true(json_object_get(args, "regex")),
        .icase = !json_is_true(json_object_get(args, "case_sensitive")),
        .pat = json_string_value(json_object_get(args, "pattern")),
        .plen = json_string_length(json_object_get(args, "pattern")),
        .include = json_object_get(args, "include"),
        .exclude = json_object_get(args, "exclude"),
        .before = json_integer_value(json_object_get(args, "context_before")),
        .after = json_integer_value(json_object_get(args, "context_after")),
        .max_results = json_integer_value(json_object_get(args, "max_results")),
        .max_file_size = json_integer_value(json_object_get(args, "max_file_size")),
    };
    if (st.plen == 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'pattern' must not be empty");
    if (st.before > 100 || st.after > 100 || st.before < 0 || st.after < 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "context_before and context_after are 0 to 100");
    int64_t lim = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES);
    if (lim > 0 && lim < st.max_results)
        st.max_results = lim;
    if (st.use_re) {
        if (memchr(st.pat, '\0', st.plen))
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'pattern' contains a NUL character");
        int rc = regcomp(&st.re, st.pat, REG_EXTENDED | (st.icase ? REG_ICASE : 0));
        if (rc != 0) {
            char why[200];
            regerror(rc, &st.re, why, sizeof why);
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'pattern' is not a POSIX extended regex: %s", why);
        }
    } else if (st.icase) {
        if (!(st.lpat = abx_malloc(st.plen + 1)))
            return files_oom(r);
        for (size_t i = 0; i < st.plen; i++)
            st.lpat[i] = (char)tolower((unsigned char)st.pat[i]);
    }
    abx_err e = ABX_OK;
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    struct stat sb;
    if (fd < 0)
        e = files_path_errno(ctx, r, -fd, "path");
    else if (fstat(fd, &sb) != 0)
        e = files_path_errno(ctx, r, errno, "path");
    else if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
        e = abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "path '%s' is a %s", files_label(ctx, "path"),
                            files_type_name(sb.st_mode));
    if (!e && !(st.results = json_array()))
        e = files_oom(r);
    if (!e && S_ISDIR(sb.st_mode)) {
        files_walk_opts o = {.ctx = ctx, .args = args, .param = "path", .check = FILES_WALK_ADMIT,
                             .hidden = json_is_true(json_object_get(args, "include_hidden")), .cancellable = true,
                             .filter = search_drops, .filter_ud = &st};
        bool cut = false;
        (void)files_walk_run(&o, fd, NULL, pv->canonical, "path", search_entry, &st, &cut); /* unreadable: no results */
        st.truncated = st.truncated || cut;
    } else if (!e) { /* one file, named explicitly: searched whatever include/exclude say */
        const char *slash = strrchr(pv->canonical, '/');
        files_clear_nonblock(fd);
        search_file(&st, fd, &sb, slash ? slash + 1 : pv->canonical);
    }
    if (fd >= 0)
        close(fd);
    if (st.use_re)
        regfree(&st.re);
    abx_free(st.lpat);
    abx_free(st.buf);
    abx_free(st.lbuf);
    if (e) {
        json_decref(st.results);
        return e;
    }
    abx_reply_json(r, json_pack("{s:s, s:o, s:I, s:b, s:I, s:I}", "path", pv->canonical, "results", st.results, "count",
                                (json_int_t)json_array_size(st.results), "truncated", st.truncated, "files_scanned",
                                (json_int_t)st.scanned, "files_skipped", (json_int_t)st.skipped));
    return ABX_OK;
}

/* ---- files.find ---- */

typedef struct find_st {
    const char *pattern;
    bool by_path;     /* the pattern has a '/': matched against the relative path */
    int want;         /* 0 any, 1 file, 2 directory */
    json_t *results;
} find_st;

/* Each entry the walker delivers: symlinks are reported as symlinks (never followed);
 * a match is one result, counted against max_results. */
static bool find_matches(const find_st *st, const files_walk_entry *e)
{
    bool is_dir = S_ISDIR(e->st.st_mode);
    bool type_ok = st->want == 0 || (st->want == 1 && S_ISREG(e->st.st_mode)) || (st->want == 2 && is_dir);
    return type_ok && fnmatch(st->pattern, st->by_path ? e->rel : e->name, 0) == 0;
}

/* Entries that are neither a match nor a directory to go through are dropped before
 * the policy is asked. */
static bool find_drops(const files_walk_entry *e, void *ud)
{
    return !S_ISDIR(e->st.st_mode) && !find_matches(ud, e);
}

static files_walk_step find_entry(files_walk *w, const files_walk_entry *e, void *ud)
{
    find_st *st = ud;
    if (!find_matches(st, e))
        return FILES_WALK_NEXT;
    if (!files_walk_take(w))
        return FILES_WALK_STOP;
    json_t *o = json_pack("{s:o, s:s, s:I}", "path", abx_text_json(e->rel, strlen(e->rel)), "type",
                          files_type_name(e->st.st_mode), "size", (json_int_t)e->st.st_size);
    if (o)
        json_array_append_new(st->results, o);
    return FILES_WALK_NEXT;
}

static abx_err files_find(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
    const char *type = json_string_value(json_object_get(args, "type"));
    find_st st = {
        .pattern = json_string_value(json_object_get(args, "pattern")),
        .want = strcmp(type, "file") == 0 ? 1 : strcmp(type, "directory") == 0 ? 2 : 0,
    };
    int64_t max = json_integer_value(json_object_get(args, "max_results"));
    st.by_path = strchr(st.pattern, '/') != NULL;
    int64_t lim = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES);
    if (lim > 0 && lim < max)
        max = lim;
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "path '%s' is not a directory", pv->canonical);
    if (fd < 0)
        return files_path_errno(ctx, r, -fd, "path");
    if (!(st.results = json_array())) {
        close(fd);
        return files_oom(r);
    }
    files_walk_opts o = {.ctx = ctx, .args = args, .param = "path", .check = FILES_WALK_ADMIT,
                         .hidden = json_is_true(json_object_get(args, "include_hidden")), .cancellable = true,
                         .max_entries = max, .filter = find_drops, .filter_ud = &st};
    bool truncated = false;
    (void)files_walk_run(&o, fd, NULL, pv->canonical, "path", find_entry, &st, &truncated); /* unreadable: none */
    close(fd);
    abx_reply_json(r, json_pack("{s:s, s:o, s:I, s:b}", "path", pv->canonical, "results", st.results, "count",
                                (json_int_t)json_array_size(st.results), "truncated", truncated));
    return ABX_OK;
}

static const abx_param search_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "Directory to search (recursively; symlinks are not followed) or one file"},
    {"pattern", ABX_T_STRING, .required = true, .doc = "Text to find in each line (a regex when regex=true)"},
    {"regex", ABX_T_BOOL, .dflt = "false", .doc = "pattern is a POSIX extended regular expression"},
    {"case_sensitive", ABX_T_BOOL, .dflt = "true", .doc = "false: ignore case (ASCII letters for literal patterns)"},
    {"include", ABX_T_LIST, .item = ABX_T_STRING,
     .doc = "Only files whose relative path or name matches one of these globs (fnmatch, '*' crosses '/')"},
    {"exclude", ABX_T_LIST, .item = ABX_T_STRING,
     .doc = "Skip files and directories whose relative path or name matches one of these globs"},
    {"include_hidden", ABX_T_BOOL, .dflt = "false", .doc = "Also search names starting with '.' (.git, .env, ...)"},
    {"context_before", ABX_T_INT, .dflt = "0", ABX_RANGE(0, 100), .doc = "Lines of context before each match"},
    {"context_after", ABX_T_INT, .dflt = "0", ABX_RANGE(0, 100), .doc = "Lines of context after each match"},
    {"max_results", ABX_T_INT, .dflt = "1000", ABX_RANGE(1, 100000), .doc = "Stop after this many matching lines"},
    {"max_file_size", ABX_T_INT, .dflt = "10485760", ABX_MIN(1), .doc = "Skip files larger than this (bytes)"},
    {0},
};

static const abx_param find_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "Directory to search (recursively; symlinks are not followed)"},
    {"pattern", ABX_T_STRING, .dflt = "\"*\"",
     .doc = "Glob (fnmatch) on entry names; with a '/', on the path relative to 'path'"},
    {"type", ABX_T_ENUM, .dflt = "\"any\"", .choices = "file|directory|any", .doc = "Kind of entries to report"},
    {"max_results", ABX_T_INT, .dflt = "1000", ABX_RANGE(1, 100000), .doc = "Stop after this many entries"},
    {"include_hidden", ABX_T_BOOL, .dflt = "false", .doc = "Also report and descend into names starting with '.'"},
    {0},
};

/* results: what each op answers */
static const abx_param search_match_fields[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "Relative to the searched directory"},
    {"line", ABX_T_INT, .required = true, .doc = "Line number (from 1)"},
    {"text", ABX_T_STRING, .required = true},
    {"before", ABX_T_LIST, ABX_T_STRING, .required = true, .doc = "Context lines before"},
    {"after", ABX_T_LIST, ABX_T_STRING, .required = true, .doc = "Context lines after"},
    {0},
};

static const abx_param search_result[] = {
    {"path", ABX_T_STRING, .required = true},
    {"results", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = search_match_fields},
    {"count", ABX_T_INT, .required = true},
    {"truncated", ABX_T_BOOL, .required = true},
    {"files_scanned", ABX_T_INT, .required = true},
    {"files_skipped", ABX_T_INT, .required = true},
    {0},
};

static const abx_param find_match_fields[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "Relative to the searched directory"},
    {"type", ABX_T_ENUM, .required = true, .choices = FILES_TYPE_CHOICES},
    {"size", ABX_T_INT, .required = true},
    {0},
};

static const abx_param find_result[] = {
    {"path", ABX_T_STRING, .required = true},
    {"results", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = find_match_fields},
    {"count", ABX_T_INT, .required = true},
    {"truncated", ABX_T_BOOL, .required = true},
    {0},
};

const abx_op_def files_search_ops[] = {
    {.id = "files.search", .result = search_result, .effects = ABX_EFF_READ,
     .summary = "Search file contents for a literal or regex, with include/exclude globs, context lines and line "
                "numbers; binary files are skipped.",
     .http = {"POST /files/search"}, .params = search_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_regular", .handler = files_search},
    {.id = "files.find", .result = find_result, .effects = ABX_EFF_READ, .summary = "Find files and directories whose names match a glob.",
     .http = {"POST /files/find"}, .params = find_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_find},
    {0},
};
