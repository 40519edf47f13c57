/* namespace.c — the life of a namespace's per-server state. A namespace is a descriptor
 * (abx_namespace: name, ops, state_new, state_free); the server hands its list to
 * abx_ns_start when it starts and calls abx_ns_stop when it is freed, as nginx drives
 * its modules' create/exit hooks. The server names no namespace and no namespace names
 * the server: a handler finds its state through the descriptor it owns. */
#include "pipeline/pipeline.h"
#include <stdio.h>
#include <string.h>


/* The namespace's own definition of op id (its static tables), or NULL. */
static const abx_op_def *ns_own_def(const abx_namespace *ns, const char *id)
{
    for (const abx_op_def *d = ns->ops; d && d->id; d++)
        if (strcmp(d->id, id) == 0)
            return d;
    for (const abx_op_def *const *t = ns->op_tables; t && *t; t++)
        for (const abx_op_def *d = *t; d->id; d++)
            if (strcmp(d->id, id) == 0)
                return d;
    return NULL;
}

int abx_ns_start(abx_server *s, const abx_namespace *const *list, char *err, size_t errlen)
{
    if (s->n_ns) /* started already (a start retried after a failure): keep those states */
        return 0;
    for (; *list; list++) {
        if (s->n_ns == ABX_ARRAY_LEN(s->ns)) {
            snprintf(err, errlen, "at most %zu namespaces", ABX_ARRAY_LEN(s->ns));
            abx_ns_stop(s);
            return -1;
        }
        void *state = NULL;
        if ((*list)->state_new && !(state = (*list)->state_new())) {
            snprintf(err, errlen, "out of memory");
            abx_ns_stop(s);
            return -1;
        }
        s->ns[s->n_ns].ns = *list;
        s->ns[s->n_ns].state = state;
        s->n_ns++;
        for (const char *const *id = (*list)->jail_checked; id && *id; id++) {
            const abx_op_def *def = ns_own_def(*list, *id);
            if (!def || s->n_jail_checked == ABX_ARRAY_LEN(s->jail_checked)) {
                snprintf(err, errlen, "namespace %s: jail_checked op %s is not one of its ops, or too many",
                         (*list)->name, *id);
                abx_ns_stop(s);
                return -1;
            }
            s->jail_checked[s->n_jail_checked++] = def;
        }
    }
    return 0;
}

bool abx_ns_jail_checked(const abx_server *s, const abx_op_def *def)
{
    for (size_t i = 0; i < s->n_jail_checked; i++)
        if (s->jail_checked[i] == def)
            return true;
    return false;
}

void abx_ns_stop(abx_server *s)
{
    s->n_jail_checked = 0;
    while (s->n_ns > 0) { /* the reverse of the start order */
        s->n_ns--;
        if (s->ns[s->n_ns].ns->state_free && s->ns[s->n_ns].state)
            s->ns[s->n_ns].ns->state_free(s->ns[s->n_ns].state);
        s->ns[s->n_ns].state = NULL;
    }
}

void *abx_ns_state(abx_server *s, const abx_namespace *ns)
{
    for (size_t i = 0; i < s->n_ns; i++)
        if (s->ns[i].ns == ns)
            return s->ns[i].state;
    return NULL;
}

void *abx_ctx_ns_state(abx_ctx *ctx, const abx_namespace *ns) { return abx_ns_state(ctx->req->server, ns); }

const abx_namespace *abx_ns_of(abx_server *s, const char *op_id)
{
    size_t len = strcspn(op_id, ".");
    for (size_t i = 0; i < s->n_ns; i++)
        if (strlen(s->ns[i].ns->name) == len && strncmp(s->ns[i].ns->name, op_id, len) == 0)
            return s->ns[i].ns;
    return NULL;
}

/* The legacy command registry (POST /commands/{name}): the op id of a declarative
 * command by its original name, asking the registry the server installed from ext. */
const char *abx_command_op_id(abx_server *s, const char *name)
{
    const char *id, *n;
    for (size_t i = 0; s->commands.fn && (id = s->commands.fn(s->commands.ud, i, &n)); i++)
        if (strcmp(n, name) == 0)
            return id;
    return NULL;
}
