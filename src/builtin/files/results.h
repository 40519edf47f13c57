/* results.h — field rows the files ops' result declarations share (each op's table is
 * next to its handler; these macros expand to abx_param rows inside them). */
#ifndef ABX_FILES_RESULTS_H
#define ABX_FILES_RESULTS_H

#define FILES_TYPE_CHOICES "file|directory|symlink|fifo|socket|char_device|block_device|other"

/* files_stat_json's fields; `req` is true where they are always present */
#define FILES_STAT_FIELDS(req)                                                                                    \
    {"type", ABX_T_ENUM, .required = req, .choices = FILES_TYPE_CHOICES,                                          \
     .doc = "What the path is"},                                                                                  \
        {"size", ABX_T_INT, .required = req, .doc = "Size in bytes"},                                             \
        {"mode", ABX_T_STRING, .required = req, .dflt = "\"0644\"", .doc = "Permission bits, octal"},             \
        {"mtime", ABX_T_STRING, .required = req, .doc = "Modification time, ISO 8601 UTC"},                       \
        {"mtime_ms", ABX_T_INT, .required = req, .doc = "Modification time, milliseconds since the epoch"},       \
        {"uid", ABX_T_INT, .required = req, .doc = "Owner's user id"},                                            \
        {"gid", ABX_T_INT, .required = req, .doc = "Owner's group id"}

/* warnings a result may carry (files.git_config_hook) */
#define FILES_WARNINGS_FIELD                                                                                      \
    {"warnings", ABX_T_LIST, ABX_T_OBJECT, .fields = files_warning_fields,                                        \
     .doc = "Things to know about what was read or written (code and message)"}
#define FILES_WARNING_ROWS                                                                                        \
    static const abx_param files_warning_fields[] = {                                                             \
        {"code", ABX_T_STRING, .required = true, .dflt = "\"files.git_config_hook\""},                            \
        {"message", ABX_T_STRING, .required = true},                                                              \
        {0},                                                                                                      \
    }

#endif
