/* results.h — result rows several builtin namespaces share (abx_proc_json's process
 * state, the output stream's events); each op's own table is next to its handler and
 * expands these macros inside it. */
#ifndef ABX_BUILTIN_RESULTS_H
#define ABX_BUILTIN_RESULTS_H

#define ABX_PROC_STATUS_CHOICES "running|completed|timed_out|killed"

/* abx_proc_json: a process's state */
#define ABX_PROC_FIELDS                                                                                           \
    {"pid", ABX_T_INT, .required = true, .dflt = "4242"},                                                         \
        {"running", ABX_T_BOOL, .required = true},                                                                \
        {"status", ABX_T_ENUM, .required = true, .choices = ABX_PROC_STATUS_CHOICES},                             \
        {"started_at", ABX_T_STRING, .required = true, .doc = "ISO 8601 UTC"},                                    \
        {"duration_ms", ABX_T_INT, .required = true},                                                             \
        {"argv", ABX_T_LIST, ABX_T_STRING, .required = true, .doc = "What runs"},                                 \
        {"owner", ABX_T_STRING, .required = true, .doc = "The principal that started it"},                        \
        {"stdout_bytes", ABX_T_INT, .required = true}, {"stderr_bytes", ABX_T_INT, .required = true},            \
        {"pty", ABX_T_BOOL, .required = true, .doc = "A terminal"},                                               \
        {"tag", ABX_T_STRING, .required = true, .nullable = true},                                                \
        {"exit_code", ABX_T_INT, .required = true, .nullable = true, .doc = "null while running or when signalled"}, \
        {"signal", ABX_T_STRING, .required = true, .nullable = true, .doc = "The signal that ended it (KILL, TERM)"}, \
        {"ended_at", ABX_T_STRING, .required = true, .nullable = true}

/* abx_exec_run: a finished (or still running) command's result */
#define ABX_RUN_FIELDS                                                                                            \
    {"status", ABX_T_ENUM, .required = true, .choices = ABX_PROC_STATUS_CHOICES},                                 \
        {"pid", ABX_T_INT, .required = true},                                                                     \
        {"exit_code", ABX_T_INT, .required = true, .nullable = true, .dflt = "0"},                                \
        {"signal", ABX_T_STRING, .required = true, .nullable = true},                                             \
        {"running", ABX_T_BOOL, .required = true, .doc = "The time budget ended first; it keeps running"},       \
        {"stdout", ABX_T_STRING, .required = true, .dflt = "\"hi\\n\""},                                          \
        {"stdout_truncated", ABX_T_BOOL, .required = true},                                                       \
        {"stderr", ABX_T_STRING, .required = true},                                                               \
        {"stderr_truncated", ABX_T_BOOL, .required = true},                                                      \
        {"truncated", ABX_T_BOOL, .required = true},                                                              \
        {"duration_ms", ABX_T_INT, .required = true},                                                             \
        {"argv", ABX_T_LIST, ABX_T_STRING, .required = true}

/* the output stream's events (commands.stream, process.stream): declare with
 * ABX_OUTPUT_EVENT_ROWS(prefix) and use prefix##_events */
#define ABX_OUTPUT_EVENT_ROWS(pfx)                                                                                \
    static const abx_param pfx##_chunk_fields[] = {                                                               \
        {"data", ABX_T_STRING, .required = true}, {"offset", ABX_T_INT, .required = true},                        \
        {"encoding", ABX_T_ENUM, .choices = "base64", .doc = "present when data is base64 (encoding=base64)"},     \
        {0}};                                                                                                     \
    static const abx_param pfx##_dropped_fields[] = {{"stream", ABX_T_ENUM, .required = true,                     \
                                                      .choices = "stdout|stderr"},                                \
                                                     {"from", ABX_T_INT, .required = true},                       \
                                                     {"to", ABX_T_INT, .required = true},                         \
                                                     {0}};                                                        \
    static const abx_param pfx##_exit_fields[] = {ABX_PROC_FIELDS, {0}};                                          \
    static const abx_param pfx##_start_fields[] = {{"pid", ABX_T_INT, .required = true}, {0}};                    \
    static const abx_param pfx##_events[] = {                                                                     \
        {"start", ABX_T_OBJECT, .fields = pfx##_start_fields, .doc = "The process started (commands.stream)"},   \
        {"stdout", ABX_T_OBJECT, .fields = pfx##_chunk_fields, .doc = "Output; id resumes (Last-Event-ID)"},      \
        {"stderr", ABX_T_OBJECT, .fields = pfx##_chunk_fields},                                                   \
        {"dropped", ABX_T_OBJECT, .fields = pfx##_dropped_fields, .doc = "Output from..to fell off the ring"},   \
        {"exit", ABX_T_OBJECT, .fields = pfx##_exit_fields, .doc = "The process ended (the last event)"},        \
        {0},                                                                                                      \
    }

#endif
