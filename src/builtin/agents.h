/* agents.h — what the agents namespace's files share (agents.c: ops, sessions, adapter
 * selection; agents_turn.c: one turn of a CLI, confined, its events; agents_cli.c: the
 * adapters' command lines and the mapping of their JSON lines to abx's event schema). */
#ifndef ABX_BUILTIN_AGENTS_H
#define ABX_BUILTIN_AGENTS_H

#include "builtin/builtin.h"
#include <pthread.h>

typedef struct agents_adapter {
    const char *id;          /* "codex", "claude_code" (op ids, agents: scopes) */
    const char *wire;        /* "codex", "claude-code" (paths, headers, model strings) */
    const char *requirement; /* install requirement: "codex-cli" */
    const char *base_url;    /* the model API when agents.<id>.base_url is not set */
    const char *model;       /* the model when neither the call nor agents.<id>.model says */
} agents_adapter;

extern const agents_adapter agents_adapters[2];
/* By id or wire name; NULL when it names no adapter. */
const agents_adapter *agents_adapter_find(const char *name);

/* One session: a principal's conversation with one adapter in one folder. */
typedef struct agents_session {
    char id[24];
    char *owner;
    const agents_adapter *ad;
    char *cwd;               /* canonical, admitted at create */
    char *model;
    char *thread;            /* the CLI's own session id once the first turn told it */
    int turns;
    bool busy;               /* a turn is running */
    char *last_final;
    int64_t created_ms;
    struct agents_session *next;
} agents_session;

typedef struct agents_state {
    pthread_mutex_t mu;
    agents_session *list;
    unsigned long seq;
} agents_state;

/* What a turn is given: the adapter, the folder, the model, the CLI's session to resume
 * (or NULL), the prompt, the installed program, the config's agents section. */
typedef struct agents_turn_in {
    const agents_adapter *ad;
    const char *cwd;         /* NULL: the scope root */
    const char *model;
    const char *resume;
    const char *prompt;
    const char *session_id;  /* abx's session id for the ledger, or NULL (run) */
    int64_t timeout_ms;
    const json_t *config;    /* agents: (borrowed), may be NULL */
} agents_turn_in;

/* The result of a turn: {final, tool_calls, files_changed, events, thread, exit_code}. */
typedef struct agents_turn agents_turn;
/* The admitted cwd argument, else the scope root (the statement's), else the workspace. */
char *agents_default_cwd(abx_ctx *ctx);
/* Start the turn (the CLI confined); NULL with the reply's error set. */
agents_turn *agents_turn_start(abx_ctx *ctx, const agents_turn_in *in, abx_reply *r);
/* Run it to its end and answer the result (run; send_event without streaming). Takes t. */
abx_err agents_turn_finish(abx_ctx *ctx, agents_turn *t, abx_reply *r, json_t **result);
/* Answer with an SSE stream of the turn's events; on_end(ud, result) runs at its end. */
void agents_turn_stream(agents_turn *t, abx_reply *r, void (*on_end)(void *ud, const json_t *result), void *ud,
                        void (*ud_free)(void *ud));

/* agents_cli.c: the CLI's argv (NULL-terminated, malloc'd strings; agents_argv_free),
 * the extra environment (object of strings, owned), and one JSON line mapped to abx
 * events appended to out. */
char **agents_argv(const agents_turn_in *in, const char *program);
void agents_argv_free(char **argv);
json_t *agents_env(const agents_turn_in *in);
void agents_map_line(const agents_adapter *ad, const json_t *line, json_t *out);
/* The setting key of agents.<adapter>: a string or NULL. */
const char *agents_setting(const json_t *config, const agents_adapter *ad, const char *key);

#endif
