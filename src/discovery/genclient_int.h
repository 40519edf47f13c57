/* genclient_int.h — what genclient.c shares with genresult.c (the typed results). */
#ifndef ABX_GENCLIENT_INT_H
#define ABX_GENCLIENT_INT_H
#include "discovery/discovery.h"
#include "core/util.h"

/* CamelCase of a dotted/underscored id, appended to b */
void abx__gen_camel(abx_buf *b, const char *s, size_t n);
/* the Python type of one catalog param/field entry (typed_dict: the class of its fields) */
void abx__gen_py_type(abx_buf *b, const json_t *p, const char *typed_dict);
/* a TypeScript interface for a list of catalog param/field entries (nested ones first) */
void abx__gen_ts_interface(abx_buf *b, const json_t *params, const char *iface, const char *doc);

/* genresult.c: the name of an op's result type (CamelIdResult), appended to b; false
 * (nothing appended) when the op declares no result */
bool abx__gen_result_name(abx_buf *b, const json_t *e);
/* the TypedDicts (Python) / interfaces (TypeScript) of an op's declared result */
void abx__gen_py_result(abx_buf *b, const json_t *e);
void abx__gen_ts_result(abx_buf *b, const json_t *e);
#endif
