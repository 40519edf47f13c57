/* offload.h — what keeps blocking work off the event-driven I/O threads: a bounded pool
 * of worker threads for handlers that wait (commands, approval waits, long polls, Python
 * workers), and stream pumps that run a blocking stream reader on a thread of their own
 * and hand its bytes to libmicrohttpd through a bounded buffer, suspending the
 * connection while the buffer is empty. Both resume connections with
 * MHD_resume_connection, so the daemon runs with MHD_ALLOW_SUSPEND_RESUME. */
#ifndef ABX_HTTP_OFFLOAD_H
#define ABX_HTTP_OFFLOAD_H

#include "core/core.h"
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- the worker pool ---- */
typedef struct abx_workers abx_workers;
typedef void (*abx_job_fn)(void *arg);

/* Threads start on demand, up to max_threads; at most max_queue jobs wait for one. */
abx_workers *abx_workers_new(int max_threads, int max_queue);
/* false when every thread is busy and the queue is full, or the pool is stopping: the
 * caller answers 503 request.busy instead. */
bool abx_workers_submit(abx_workers *w, abx_job_fn fn, void *arg);
/* Runs what is queued, waits for every job to end, joins the threads. */
void abx_workers_stop(abx_workers *w);
void abx_workers_free(abx_workers *w);
/* Jobs running or queued now (for /metrics). */
int abx_workers_busy(abx_workers *w);

/* ---- stream pumps ---- */
typedef struct abx_pumps abx_pumps;
typedef long (*abx_pump_read_fn)(void *state, char *buf, size_t max);

abx_pumps *abx_pumps_new(void);
/* A response whose content comes from read_fn, run on a pump thread: at most cap bytes
 * wait in memory (a reader that stops reading stops the producer, never grows abx).
 * free_fn(state) runs on the pump thread after its last read, when the stream ends or
 * the client goes away. NULL when out of memory or threads (state is then freed). */
struct MHD_Response *abx_pump_response(abx_pumps *ps, struct MHD_Connection *c, abx_pump_read_fn read_fn,
                                       void *state, void (*free_fn)(void *), size_t cap);
/* Ends every pump (each stops after its current read) and resumes the connections they
 * suspended, so the daemon can stop; waits until the pump threads are gone. */
void abx_pumps_stop(abx_pumps *ps);
void abx_pumps_free(abx_pumps *ps);
/* Pumps alive now (for /metrics). */
int abx_pumps_live(abx_pumps *ps);

#endif
