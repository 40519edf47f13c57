/* zmq_lazy.c — the libzmq table behind zmq_lazy.h, loaded on first use. */
#define ABX_ZMQ_LAZY_IMPL 1
#include "builtin/zmq_lazy.h"

#include "core/lazylib.h"

void *abx_zmq_slot[ABX_ZMQ_N];

#define ABX_ZMQ_NAME(f) #f,
static const char *const zmq_names[ABX_ZMQ_N] = {ABX_ZMQ_FUNCS(ABX_ZMQ_NAME)};
#undef ABX_ZMQ_NAME

static abx_lazylib zmq_lib = {
    .soname = ABX_ZMQ_SONAME,
    .names = zmq_names,
    .slots = abx_zmq_slot,
    .n = ABX_ZMQ_N,
};

int abx_zmq_load(char *why, size_t whylen)
{
    return abx_lazylib_load(&zmq_lib, why, whylen);
}
