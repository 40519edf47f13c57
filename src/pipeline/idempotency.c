/* idempotency.c — Idempotency-Key for mutating calls: a key repeated by the same
 * principal within 24 h answers the first call's recorded result instead of running
 * again; a repeat while the first still runs, or for another op, is 409. Kept in
 * memory (bounded, oldest dropped): a restart forgets keys, the ledger does not. */
#include "pipeline/pipeline.h"
#include <string.h>

#define IDEM_MAX 4096
#define IDEM_TTL_MS (24LL * 3600 * 1000)

typedef struct entry {
    char key[200];           /* principal \x1f key */
    char op[ABX_ID_MAX];
    bool done;
    int status;
    char *body;              /* owned, JSON text */
    int64_t at;
} entry;

struct abx_idem {
    pthread_mutex_t mu;
    entry e[IDEM_MAX];
};

struct abx_idem *abx_idem_new(void)
{
    struct abx_idem *i = abx_calloc(1, sizeof *i);
    if (i)
        pthread_mutex_init(&i->mu, NULL);
    return i;
}

void abx_idem_free(struct abx_idem *i)
{
    if (!i)
        return;
    for (size_t k = 0; k < IDEM_MAX; k++)
        abx_free(i->e[k].body);
    pthread_mutex_destroy(&i->mu);
    abx_free(i);
}

static void make_key(const abx_request *r, char out[200])
{
    snprintf(out, 200, "%s\x1f%s", abx_policy_principal_id(r->policy, r->slot), r->idem_key);
}

bool abx_idem_begin(abx_request *r)
{
    struct abx_idem *i = r->server->idem;
    if (!i || !r->idem_key || !*r->idem_key || !(r->op->effects & ~ABX_EFF_READ))
        return false;
    char key[200];
    make_key(r, key);
    int64_t now = abx_now_ms();
    pthread_mutex_lock(&i->mu);
    entry *hit = NULL, *free_slot = NULL;
    for (size_t k = 0; k < IDEM_MAX; k++) {
        entry *x = &i->e[k];
        if (x->key[0] && now - x->at > IDEM_TTL_MS) {
            abx_free(x->body);
            memset(x, 0, sizeof *x);
        }
        if (x->key[0] && strcmp(x->key, key) == 0)
            hit = x;
        if (!x->key[0] && !free_slot)
            free_slot = x;
        else if (x->key[0] && x->done && (!free_slot || (free_slot->key[0] && x->at < free_slot->at)))
            free_slot = x; /* the oldest finished entry makes room */
    }
    bool answered = false;
    if (hit) {
        if (!hit->done || strcmp(hit->op, r->op->id) != 0) {
            abx_fail(r, ABX_E_REQUEST_IDEMPOTENCY_CONFLICT, "%s",
                     hit->done ? "this Idempotency-Key was used for another operation"
                               : "a call with this Idempotency-Key is still running");
        } else {
            json_t *b = json_loads(hit->body ? hit->body : "{}", 0, NULL);
            if (hit->status >= 400) {
                const json_t *e = json_object_get(b, "error");
                int code = abx_err_by_code(json_string_value(json_object_get(e, "code")));
                abx_fail(r, code > 0 ? (abx_err)code : ABX_E_SERVER_INTERNAL, "%s",
                         json_string_value(json_object_get(e, "message")) ?: "");
                json_decref(b);
            } else {
                r->reply.status = hit->status;
                abx_reply_json(&r->reply, b);
            }
        }
        answered = true;
    } else if (free_slot) {
        abx_free(free_slot->body);
        memset(free_slot, 0, sizeof *free_slot);
        snprintf(free_slot->key, sizeof free_slot->key, "%s", key);
        snprintf(free_slot->op, sizeof free_slot->op, "%s", r->op->id);
        free_slot->at = now;
        r->idem_owner = true;
    }
    pthread_mutex_unlock(&i->mu);
    return answered;
}

void abx_idem_end(abx_request *r)
{
    struct abx_idem *i = r->server->idem;
    if (!i || !r->idem_owner)
        return;
    char key[200];
    make_key(r, key);
    size_t len;
    /* streams, bytes and sockets have no body to replay: the key is released */
    bool replayable = !r->reply.stream_read && !r->reply.ws_ops && r->reply.fd < 0 && !r->reply.raw;
    char *body = replayable ? abx_reply_render(&r->reply, &len) : NULL;
    pthread_mutex_lock(&i->mu);
    for (size_t k = 0; k < IDEM_MAX; k++) {
        entry *x = &i->e[k];
        if (strcmp(x->key, key) != 0)
            continue;
        if (!replayable) {
            memset(x, 0, sizeof *x);
        } else {
            x->done = true;
            x->status = abx_reply_http_status(&r->reply);
            x->body = body ? abx_strdup(body) : NULL;
        }
        break;
    }
    pthread_mutex_unlock(&i->mu);
    free(body);
    r->idem_owner = false;
}
