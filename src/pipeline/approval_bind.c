/* approval_bind.c — what an approval binds besides the arguments: the content of the
 * files they name. An approver who reviewed `sh script.sh` approved what script.sh
 * said at that moment; if the requester could rewrite it before the decision, the
 * approval would cover code nobody reviewed. So when a call is held, every existing
 * regular file its arguments name is hashed (SHA-256) and shown to the approver, and
 * before the approved run the same names are resolved and hashed again: any difference
 * (content, a name that now resolves elsewhere, a file that disappeared or became a
 * symlink, a directory, a FIFO) fails the held call with approval.stale.
 *
 * "Named" means: every path-kind parameter (the canonical values the policy decided
 * on), and for command ops (commands.*, process.start, declarative custom.* commands
 * through their expanded template) the resolved program and every argv word — and
 * every word of a command string inside an argv word (`sh -c '...'`) or after `name=` —
 * that, resolved against the directory the process will start in, is a regular file
 * inside the roots the call's process is given (denied and protected files excepted:
 * their hash is not shown to anyone). Files are read beneath their root through
 * the jail (openat2, no symlinks), whole, streaming; a file over BIND_MAX_FILE_BYTES,
 * more than BIND_MAX_FILES named files or BIND_MAX_TOTAL_BYTES in all refuse the hold, since hashing a prefix would
 * let a change past it through. The resolution itself (cwd, each path parameter, the
 * argv) is bound too: a name that resolves elsewhere at run time is stale. */
#include "pipeline/pipeline.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BIND_MAX_FILES 64
#define BIND_MAX_FILE_BYTES ((int64_t)64 << 20)
#define BIND_MAX_TOTAL_BYTES ((int64_t)256 << 20) /* bounds the time a hold spends hashing */

void abx_bound_files_release(abx_bound_files *b)
{
    for (size_t i = 0; i < b->n; i++) {
        abx_free(b->v[i].anchor);
        abx_free(b->v[i].name);
        abx_free(b->v[i].canonical);
        abx_free(b->v[i].root);
    }
    abx_free(b->v);
    for (size_t i = 0; i < b->n_resolved; i++)
        abx_free(b->resolved[i]);
    abx_free(b->resolved);
    memset(b, 0, sizeof *b);
}

json_t *abx_bound_files_json(const abx_bound_files *b)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < b->n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s}", "path", b->v[i].canonical, "sha256", b->v[i].sha256));
    return arr;
}

static int hash_fd(int fd, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    abx_sha256 c;
    abx_sha256_init(&c);
    unsigned char buf[64 * 1024];
    int64_t total = 0;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            break;
        total += k;
        if (total > BIND_MAX_FILE_BYTES) /* it grew while we read */
            return -EFBIG;
        abx_sha256_update(&c, buf, (size_t)k);
    }
    unsigned char d[32];
    abx_sha256_final(&c, d);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
    return 0;
}

/* Hash the regular file `canonical` beneath `root`. 0, or a negative errno: -ENOENT
 * (gone), -ELOOP (a symlink on the way: something was swapped in), -EINVAL (not a
 * regular file), -EFBIG (over the cap), others from open/read. */
static int hash_file(const char *root, const char *canonical, char out[65], int64_t *size)
{
    const char *rel;
    if (!abx_path_under(root, canonical, &rel) || strcmp(rel, ".") == 0)
        return -EINVAL;
    int rfd = abx_jail_open_root(root);
    if (rfd < 0)
        return rfd;
    /* O_NONBLOCK: a FIFO planted under the name must not hang the request */
    int fd = abx_jail_open(rfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    close(rfd);
    if (fd < 0)
        return fd;
    struct stat st;
    int rc;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode))
        rc = -EINVAL;
    else if (st.st_size > BIND_MAX_FILE_BYTES)
        rc = -EFBIG;
    else if ((rc = hash_fd(fd, out)) == 0 && size)
        *size = st.st_size;
    close(fd);
    return rc;
}

typedef struct binder {
    abx_request *r;
    abx_bound_files *b;
    abx_fs_view view;        /* the roots a process of the call may see */
    const char *cwd;         /* anchor for relative argv words */
    int64_t bytes;           /* hashed so far */
    abx_err err;
    char *msg;
    size_t msglen;
} binder;

/* The longest root the call may see that holds `canonical`, or NULL. */
static const char *root_of(const binder *B, const char *canonical)
{
    const char *best = NULL;
    const char *rel;
    char *const *lists[] = {B->view.rw, B->view.ro};
    size_t counts[] = {B->view.n_rw, B->view.n_ro};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < counts[l]; i++)
            if (abx_path_under(lists[l][i], canonical, &rel) && (!best || strlen(lists[l][i]) > strlen(best)))
                best = lists[l][i];
    const abx_decision *d = &B->r->decision;
    for (size_t i = 0; i < d->n_paths; i++)
        if (d->paths[i].root && abx_path_under(d->paths[i].root, canonical, &rel) &&
            (!best || strlen(d->paths[i].root) > strlen(best)))
            best = d->paths[i].root;
    return best;
}

static bool already(const abx_bound_files *b, const char *anchor, const char *name)
{
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->v[i].name, name) == 0 && strcmp(b->v[i].anchor, anchor) == 0)
            return true;
    return false;
}

/* One name from the arguments: bind it if it is a regular file the call may see.
 * `subject` names come from path parameters (the policy admitted them already). */
static void consider(binder *B, const char *anchor, const char *name, size_t len, bool subject)
{
    if (B->err || len == 0 || len > 4095 || memchr(name, '\0', len))
        return;
    char *nm = abx_strndup(name, len), *canon = NULL;
    if (nm && nm[0] == '/') /* an absolute name resolves the same from anywhere: one entry */
        anchor = "/";
    if (!nm || already(B->b, anchor, nm) || abx_path_canon(anchor, nm, &canon) != 0)
        goto out;
    const char *root = root_of(B, canon);
    if (!root)
        goto out;
    /* never show (a hash of) a denied or protected file; anything else under a root the
     * process is given is something it may run or read, so it is bound */
    if (!subject && abx_policy_path_hidden(B->r->policy, B->r->slot, B->r->op, canon))
        goto out;
    char sha[65];
    int64_t size = 0;
    int rc = hash_file(root, canon, sha, &size);
    if (rc == 0 && (B->bytes += size) > BIND_MAX_TOTAL_BYTES) {
        B->err = ABX_E_LIMIT_MAX_BYTES;
        snprintf(B->msg, B->msglen, "the files the call names add up to more than %lld MiB: abx cannot bind them "
                 "to an approval, nothing was held", (long long)(BIND_MAX_TOTAL_BYTES >> 20));
        goto out;
    }
    if (rc == -EFBIG) {
        B->err = ABX_E_LIMIT_MAX_BYTES;
        snprintf(B->msg, B->msglen,
                 "'%.200s' is larger than %lld MiB: abx cannot bind its content to an approval, nothing was held",
                 canon, (long long)(BIND_MAX_FILE_BYTES >> 20));
        goto out;
    }
    if (rc != 0) /* missing, not a regular file, unreadable: names nothing to bind */
        goto out;
    if (B->b->n >= BIND_MAX_FILES) {
        B->err = ABX_E_LIMIT_MAX_BYTES;
        snprintf(B->msg, B->msglen, "the call names more than %d files: abx cannot bind them all to an approval",
                 BIND_MAX_FILES);
        goto out;
    }
    abx_bound_file *g = abx_realloc(B->b->v, (B->b->n + 1) * sizeof *g);
    if (!g) {
        B->err = ABX_E_SERVER_UNAVAILABLE;
        snprintf(B->msg, B->msglen, "out of memory");
        goto out;
    }
    B->b->v = g;
    abx_bound_file *f = &g[B->b->n++];
    f->anchor = abx_strdup(anchor);
    f->name = nm;
    f->canonical = canon;
    f->root = abx_strdup(root);
    memcpy(f->sha256, sha, sizeof f->sha256);
    nm = canon = NULL;
out:
    abx_free(nm);
    abx_free(canon);
}

/* The words of a command string as a shell might see them, loosely: split at blanks
 * and shell punctuation, quoted runs also whole. Over-approximating only binds more.
 * The target of an output redirection is skipped: it is written, not read, so its
 * earlier content cannot change what runs. */
static void consider_words(binder *B, const char *s)
{
    static const char seps[] = " \t\n\r;|&<>(){}`$'\"";
    bool redirect = false;
    while (*s) {
        if (*s == '\'' || *s == '"') {
            const char *e = strchr(s + 1, *s);
            if (e) {
                if (!redirect)
                    consider(B, B->cwd, s + 1, (size_t)(e - s - 1), false);
                redirect = false;
            }
        }
        if (strchr(seps, *s)) {
            if (*s == '>')
                redirect = true;
            s++;
            continue;
        }
        size_t k = strcspn(s, seps);
        if (!redirect) {
            consider(B, B->cwd, s, k, false);
            const char *eq = memchr(s, '=', k);
            if (eq)
                consider(B, B->cwd, eq + 1, k - (size_t)(eq + 1 - s), false);
        }
        redirect = false;
        s += k;
    }
}

/* The directory relative argv words are resolved against, as the process will get it:
 * the admitted cwd, else what the op's namespace says (a session's remembered one), else the statement's first root,
 * else the workspace (exec.c). malloc'd. */
static char *call_cwd(abx_request *r, const abx_fs_view *v)
{
    const abx_decision *d = &r->decision;
    for (size_t i = 0; i < d->n_paths; i++)
        if (strcmp(d->paths[i].param, "cwd") == 0)
            return abx_strdup(d->paths[i].canonical);
    const abx_namespace *ns = abx_ns_of(r->server, r->op->id);
    if (ns && ns->bind_cwd) { /* a session's remembered directory (commands.c) */
        char *c = ns->bind_cwd(&r->ctx, r->args);
        if (c)
            return c;
    }
    return abx_strdup(v->cwd_root ? v->cwd_root : r->server->workspace);
}

/* How the call's names resolved: "cwd=…", "param[index]=canonical" for each path
 * parameter, "argv[i]=word" for the command (program resolved). The approved run must
 * resolve them the same way, or it would act on files the approver never saw. */
static char **resolutions(const abx_decision *d, const char *cwd, size_t *n)
{
    size_t total = 1 + d->n_paths + d->argv.n;
    char **v = abx_calloc(total + 1, sizeof *v);
    if (!v)
        return NULL;
    v[0] = abx_asprintf("cwd=%s", cwd);
    for (size_t i = 0; i < d->n_paths; i++)
        v[1 + i] = abx_asprintf("%s[%zu]=%s", d->paths[i].param, d->paths[i].index, d->paths[i].canonical);
    for (size_t i = 0; i < d->argv.n; i++)
        v[1 + d->n_paths + i] = abx_asprintf("argv[%zu]=%s", i, d->argv.v[i]);
    for (size_t i = 0; i < total; i++)
        if (!v[i]) {
            for (size_t k = 0; k < total; k++)
                abx_free(v[k]);
            abx_free(v);
            return NULL;
        }
    *n = total;
    return v;
}

abx_err abx_bind_files(abx_request *r, abx_bound_files *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    binder B = {.r = r, .b = out, .msg = msg, .msglen = msglen};
    const abx_decision *d = &r->decision;
    if (abx_policy_fs_view(r->policy, r->slot, r->op, d, &B.view) != 0)
        memset(&B.view, 0, sizeof B.view); /* no process view: the path roots remain */
    char *cwd = call_cwd(r, &B.view);
    B.cwd = cwd ? cwd : "/";
    for (size_t i = 0; i < d->n_paths; i++)
        consider(&B, "/", d->paths[i].canonical, strlen(d->paths[i].canonical), true);
    char *const *argv = d->argv.v;
    size_t argc = d->argv.n;
    const abx_namespace *ns = argc ? NULL : abx_ns_of(r->server, r->op->id);
    if (ns && ns->bind_argv && (argv = ns->bind_argv(&r->ctx, r->args))) /* a declarative command's template */
        while (argv[argc])
            argc++;
    for (size_t i = 0; i < argc; i++) {
        consider(&B, B.cwd, argv[i], strlen(argv[i]), false);
        if (i > 0)
            consider_words(&B, argv[i]);
    }
    abx_fs_view_release(&B.view);
    if (!B.err && (!cwd || !(out->resolved = resolutions(d, cwd, &out->n_resolved)))) {
        B.err = ABX_E_SERVER_UNAVAILABLE;
        snprintf(msg, msglen, "out of memory");
    }
    abx_free(cwd);
    if (B.err)
        abx_bound_files_release(out);
    return B.err;
}

abx_err abx_bind_check(const abx_bound_files *b, abx_request *now, char *msg, size_t msglen)
{
    size_t n = 0;
    abx_fs_view view;
    if (abx_policy_fs_view(now->policy, now->slot, now->op, &now->decision, &view) != 0)
        memset(&view, 0, sizeof view);
    char *cwd = call_cwd(now, &view);
    abx_fs_view_release(&view);
    char **res = cwd ? resolutions(&now->decision, cwd, &n) : NULL;
    abx_free(cwd);
    if (!res) {
        snprintf(msg, msglen, "out of memory");
        return ABX_E_SERVER_UNAVAILABLE;
    }
    abx_err e = ABX_OK;
    for (size_t i = 0; i < n || i < b->n_resolved; i++)
        if (e == ABX_OK && (i >= n || i >= b->n_resolved || strcmp(res[i], b->resolved[i]) != 0)) {
            const char *was = i < b->n_resolved ? b->resolved[i] : "";
            snprintf(msg, msglen, "'%.*s' now resolves differently from when the call was held; nothing ran",
                     (int)strcspn(was, "="), was);
            e = ABX_E_APPROVAL_STALE;
        }
    for (size_t i = 0; i < n; i++)
        abx_free(res[i]);
    abx_free(res);
    if (e)
        return e;
    for (size_t i = 0; i < b->n; i++) {
        const abx_bound_file *f = &b->v[i];
        char *canon = NULL;
        char sha[65];
        const char *why = NULL;
        int rc = abx_path_canon(f->anchor, f->name, &canon);
        if (rc != 0 || strcmp(canon, f->canonical) != 0)
            why = "now resolves to another file";
        else if ((rc = hash_file(f->root, f->canonical, sha, NULL)) == -ENOENT || rc == -ENOTDIR)
            why = "was removed";
        else if (rc == -ELOOP)
            why = "was replaced by a symlink";
        else if (rc == -EINVAL || rc == -EISDIR || rc == -ENXIO)
            why = "is no longer a regular file";
        else if (rc != 0)
            why = "can no longer be read";
        else if (strcmp(sha, f->sha256) != 0)
            why = "changed";
        abx_free(canon);
        if (why) {
            snprintf(msg, msglen, "'%.300s' %s after the call was held (it was approved as sha256 %.12s…); nothing ran",
                     f->canonical, why, f->sha256);
            return ABX_E_APPROVAL_STALE;
        }
    }
    return ABX_OK;
}
