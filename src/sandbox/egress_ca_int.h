/* egress_ca_int.h — what interception (egress_tls.c) asks of the CA (egress_ca.c). */
#ifndef ABX_SANDBOX_EGRESS_CA_INT_H
#define ABX_SANDBOX_EGRESS_CA_INT_H

#include "sandbox/egress_tls.h"
#include <openssl/ssl.h>
#include <stdbool.h>

bool abx_egress_ca_use_leaf(abx_egress_ca *ca, SSL *ssl, const char *host);

#endif
