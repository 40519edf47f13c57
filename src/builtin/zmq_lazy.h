/* zmq_lazy.h — libzmq for the kernels namespace, opened on the first kernel connection
 * (core/lazylib.h): include this instead of <zmq.h>. Each zmq_* function used below is
 * a macro for a pointer in abx_zmq_slot, valid once abx_zmq_load has returned 0, which
 * abx_jconn_connect does before its first zmq call (every other call follows a
 * connected abx_jconn). A function not listed here does not compile in: add it to
 * ABX_ZMQ_FUNCS. */
#ifndef ABX_BUILTIN_ZMQ_LAZY_H
#define ABX_BUILTIN_ZMQ_LAZY_H

#include <stddef.h>
#include <zmq.h>

#define ABX_ZMQ_SONAME "libzmq.so.5"
#define ABX_ZMQ_FUNCS(X)                                                                            \
    X(zmq_ctx_new) X(zmq_ctx_set) X(zmq_ctx_term) X(zmq_socket) X(zmq_setsockopt) X(zmq_connect)   \
    X(zmq_close) X(zmq_send) X(zmq_msg_init) X(zmq_msg_recv) X(zmq_msg_more) X(zmq_msg_size)        \
    X(zmq_msg_data) X(zmq_msg_close) X(zmq_poll) X(zmq_strerror)

enum {
#define ABX_ZMQ_INDEX(f) ABX_ZMQ_I_##f,
    ABX_ZMQ_FUNCS(ABX_ZMQ_INDEX)
#undef ABX_ZMQ_INDEX
    ABX_ZMQ_N
};
/* the resolved functions, by ABX_ZMQ_I_*; NULL until abx_zmq_load succeeds */
extern void *abx_zmq_slot[ABX_ZMQ_N];

/* 0 when libzmq is loaded; -1 with the reason in why */
int abx_zmq_load(char *why, size_t whylen);

/* each name stands for its slot, cast to the type zmq.h declares (inside the macro the
 * name is not expanded again, so __typeof__ sees the real declaration) */
#define ABX_ZMQ_CALL(f) ((__typeof__(&f))abx_zmq_slot[ABX_ZMQ_I_##f])
#ifndef ABX_ZMQ_LAZY_IMPL
#define zmq_ctx_new ABX_ZMQ_CALL(zmq_ctx_new)
#define zmq_ctx_set ABX_ZMQ_CALL(zmq_ctx_set)
#define zmq_ctx_term ABX_ZMQ_CALL(zmq_ctx_term)
#define zmq_socket ABX_ZMQ_CALL(zmq_socket)
#define zmq_setsockopt ABX_ZMQ_CALL(zmq_setsockopt)
#define zmq_connect ABX_ZMQ_CALL(zmq_connect)
#define zmq_close ABX_ZMQ_CALL(zmq_close)
#define zmq_send ABX_ZMQ_CALL(zmq_send)
#define zmq_msg_init ABX_ZMQ_CALL(zmq_msg_init)
#define zmq_msg_recv ABX_ZMQ_CALL(zmq_msg_recv)
#define zmq_msg_more ABX_ZMQ_CALL(zmq_msg_more)
#define zmq_msg_size ABX_ZMQ_CALL(zmq_msg_size)
#define zmq_msg_data ABX_ZMQ_CALL(zmq_msg_data)
#define zmq_msg_close ABX_ZMQ_CALL(zmq_msg_close)
#define zmq_poll ABX_ZMQ_CALL(zmq_poll)
#define zmq_strerror ABX_ZMQ_CALL(zmq_strerror)
#endif

#endif
