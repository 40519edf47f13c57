/* ossl_lazy.h — OpenSSL (libssl, libcrypto) for the few places that use it: the egress
 * proxy's credential injection (egress_ca.c, egress_tls.c), installers' SHA-512 check
 * (install.c) and the sandboxd door's TLS (server/sandboxd_grpc.c). It is opened on first
 * use (core/lazylib.h), so an idle server does not map, relocate and initialise it
 * (about 1.7 MiB resident). Include this header after every other include: it includes
 * the OpenSSL headers those files use, then makes each OpenSSL function they call a
 * macro for its pointer in abx_ossl_slot, typed by OpenSSL's own declaration.
 *
 * The entry points (abx_egress_ca_open, abx_egress_tls_new, the installer's digest, the
 * sandboxd TLS context) call abx_ossl_load first and fail with its reason when the
 * library cannot be loaded. Every call also goes through abx_ossl_need, which loads the
 * library if needed and aborts with a message if it cannot be loaded: a path that
 * reaches OpenSSL without an entry point (a free of NULL, say) never calls through a
 * NULL pointer. A function not listed in ABX_OSSL_FUNCS does not link: add it there. */
#ifndef ABX_SANDBOX_OSSL_LAZY_H
#define ABX_SANDBOX_OSSL_LAZY_H

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stddef.h>

#define ABX_OSSL_SONAME "libssl.so.3" /* its dependency libcrypto.so.3 comes with it */
#define ABX_OSSL_FUNCS(X) \
    X(BN_bin2bn) X(BN_free) X(BN_to_ASN1_INTEGER) X(ERR_clear_error) X(ERR_error_string_n) \
    X(ERR_get_error) X(ERR_reason_error_string) X(EVP_DigestFinal_ex) X(EVP_DigestInit_ex) \
    X(EVP_DigestUpdate) X(EVP_MD_CTX_free) X(EVP_MD_CTX_new) X(EVP_PKEY_Q_keygen) X(EVP_PKEY_free) \
    X(EVP_sha256) X(EVP_sha512) X(PEM_read_PrivateKey) X(PEM_read_X509) X(PEM_write_PrivateKey) \
    X(PEM_write_X509) X(RAND_bytes) X(SSL_CTX_check_private_key) X(SSL_CTX_ctrl) X(SSL_CTX_free) \
    X(SSL_CTX_load_verify_locations) X(SSL_CTX_new) X(SSL_CTX_set_alpn_select_cb) \
    X(SSL_CTX_set_default_verify_paths) X(SSL_CTX_set_verify) X(SSL_CTX_use_PrivateKey_file) \
    X(SSL_CTX_use_certificate_chain_file) X(SSL_accept) X(SSL_connect) X(SSL_ctrl) X(SSL_free) \
    X(SSL_get0_alpn_selected) X(SSL_get0_param) X(SSL_get_error) X(SSL_get_servername) \
    X(SSL_get_verify_result) X(SSL_new) X(SSL_pending) X(SSL_read) X(SSL_set1_host) X(SSL_set_fd) \
    X(SSL_shutdown) X(SSL_use_PrivateKey) X(SSL_use_certificate) X(SSL_write) X(TLS_client_method) \
    X(TLS_server_method) X(X509V3_EXT_conf_nid) X(X509V3_set_ctx) X(X509_EXTENSION_free) \
    X(X509_NAME_add_entry_by_txt) X(X509_VERIFY_PARAM_set1_ip_asc) X(X509_add_ext) \
    X(X509_check_private_key) X(X509_cmp_current_time) X(X509_cmp_time) X(X509_free) \
    X(X509_get0_notAfter) X(X509_get_default_cert_file) X(X509_get_serialNumber) \
    X(X509_get_subject_name) X(X509_getm_notAfter) X(X509_getm_notBefore) X(X509_gmtime_adj) \
    X(X509_new) X(X509_set_issuer_name) X(X509_set_pubkey) X(X509_set_version) X(X509_sign)

enum {
#define ABX_OSSL_INDEX(f) ABX_OSSL_I_##f,
    ABX_OSSL_FUNCS(ABX_OSSL_INDEX)
#undef ABX_OSSL_INDEX
    ABX_OSSL_N
};
/* the resolved functions, by ABX_OSSL_I_*; NULL until the library is loaded */
extern void *abx_ossl_slot[ABX_OSSL_N];
extern int abx_ossl_ready; /* 1 once loaded (atomic) */

/* 0 when OpenSSL is loaded; -1 with the reason in why */
int abx_ossl_load(char *why, size_t whylen);
/* load it, or abort with the reason (a call that cannot be made safely) */
void abx_ossl_need_slow(void);
static inline void abx_ossl_need(void)
{
    if (__builtin_expect(!__atomic_load_n(&abx_ossl_ready, __ATOMIC_ACQUIRE), 0))
        abx_ossl_need_slow();
}

/* inside the macro the name is not expanded again, so __typeof__ sees OpenSSL's own
 * declaration */
#define ABX_OSSL_CALL(f) (abx_ossl_need(), (__typeof__(&f))abx_ossl_slot[ABX_OSSL_I_##f])
#ifndef ABX_OSSL_LAZY_IMPL
#define BN_bin2bn ABX_OSSL_CALL(BN_bin2bn)
#define BN_free ABX_OSSL_CALL(BN_free)
#define BN_to_ASN1_INTEGER ABX_OSSL_CALL(BN_to_ASN1_INTEGER)
#define ERR_clear_error ABX_OSSL_CALL(ERR_clear_error)
#define ERR_error_string_n ABX_OSSL_CALL(ERR_error_string_n)
#define ERR_get_error ABX_OSSL_CALL(ERR_get_error)
#define ERR_reason_error_string ABX_OSSL_CALL(ERR_reason_error_string)
#define EVP_DigestFinal_ex ABX_OSSL_CALL(EVP_DigestFinal_ex)
#define EVP_DigestInit_ex ABX_OSSL_CALL(EVP_DigestInit_ex)
#define EVP_DigestUpdate ABX_OSSL_CALL(EVP_DigestUpdate)
#define EVP_MD_CTX_free ABX_OSSL_CALL(EVP_MD_CTX_free)
#define EVP_MD_CTX_new ABX_OSSL_CALL(EVP_MD_CTX_new)
#define EVP_PKEY_Q_keygen ABX_OSSL_CALL(EVP_PKEY_Q_keygen)
#define EVP_PKEY_free ABX_OSSL_CALL(EVP_PKEY_free)
#define EVP_sha256 ABX_OSSL_CALL(EVP_sha256)
#define EVP_sha512 ABX_OSSL_CALL(EVP_sha512)
#define PEM_read_PrivateKey ABX_OSSL_CALL(PEM_read_PrivateKey)
#define PEM_read_X509 ABX_OSSL_CALL(PEM_read_X509)
#define PEM_write_PrivateKey ABX_OSSL_CALL(PEM_write_PrivateKey)
#define PEM_write_X509 ABX_OSSL_CALL(PEM_write_X509)
#define RAND_bytes ABX_OSSL_CALL(RAND_bytes)
#define SSL_CTX_check_private_key ABX_OSSL_CALL(SSL_CTX_check_private_key)
#define SSL_CTX_ctrl ABX_OSSL_CALL(SSL_CTX_ctrl)
#define SSL_CTX_free ABX_OSSL_CALL(SSL_CTX_free)
#define SSL_CTX_load_verify_locations ABX_OSSL_CALL(SSL_CTX_load_verify_locations)
#define SSL_CTX_new ABX_OSSL_CALL(SSL_CTX_new)
#define SSL_CTX_set_alpn_select_cb ABX_OSSL_CALL(SSL_CTX_set_alpn_select_cb)
#define SSL_CTX_set_default_verify_paths ABX_OSSL_CALL(SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_verify ABX_OSSL_CALL(SSL_CTX_set_verify)
#define SSL_CTX_use_PrivateKey_file ABX_OSSL_CALL(SSL_CTX_use_PrivateKey_file)
#define SSL_CTX_use_certificate_chain_file ABX_OSSL_CALL(SSL_CTX_use_certificate_chain_file)
#define SSL_accept ABX_OSSL_CALL(SSL_accept)
#define SSL_connect ABX_OSSL_CALL(SSL_connect)
#define SSL_ctrl ABX_OSSL_CALL(SSL_ctrl)
#define SSL_free ABX_OSSL_CALL(SSL_free)
#define SSL_get0_alpn_selected ABX_OSSL_CALL(SSL_get0_alpn_selected)
#define SSL_get0_param ABX_OSSL_CALL(SSL_get0_param)
#define SSL_get_error ABX_OSSL_CALL(SSL_get_error)
#define SSL_get_servername ABX_OSSL_CALL(SSL_get_servername)
#define SSL_get_verify_result ABX_OSSL_CALL(SSL_get_verify_result)
#define SSL_new ABX_OSSL_CALL(SSL_new)
#define SSL_pending ABX_OSSL_CALL(SSL_pending)
#define SSL_read ABX_OSSL_CALL(SSL_read)
#define SSL_set1_host ABX_OSSL_CALL(SSL_set1_host)
#define SSL_set_fd ABX_OSSL_CALL(SSL_set_fd)
#define SSL_shutdown ABX_OSSL_CALL(SSL_shutdown)
#define SSL_use_PrivateKey ABX_OSSL_CALL(SSL_use_PrivateKey)
#define SSL_use_certificate ABX_OSSL_CALL(SSL_use_certificate)
#define SSL_write ABX_OSSL_CALL(SSL_write)
#define TLS_client_method ABX_OSSL_CALL(TLS_client_method)
#define TLS_server_method ABX_OSSL_CALL(TLS_server_method)
#define X509V3_EXT_conf_nid ABX_OSSL_CALL(X509V3_EXT_conf_nid)
#define X509V3_set_ctx ABX_OSSL_CALL(X509V3_set_ctx)
#define X509_EXTENSION_free ABX_OSSL_CALL(X509_EXTENSION_free)
#define X509_NAME_add_entry_by_txt ABX_OSSL_CALL(X509_NAME_add_entry_by_txt)
#define X509_VERIFY_PARAM_set1_ip_asc ABX_OSSL_CALL(X509_VERIFY_PARAM_set1_ip_asc)
#define X509_add_ext ABX_OSSL_CALL(X509_add_ext)
#define X509_check_private_key ABX_OSSL_CALL(X509_check_private_key)
#define X509_cmp_current_time ABX_OSSL_CALL(X509_cmp_current_time)
#define X509_cmp_time ABX_OSSL_CALL(X509_cmp_time)
#define X509_free ABX_OSSL_CALL(X509_free)
#define X509_get0_notAfter ABX_OSSL_CALL(X509_get0_notAfter)
#define X509_get_default_cert_file ABX_OSSL_CALL(X509_get_default_cert_file)
#define X509_get_serialNumber ABX_OSSL_CALL(X509_get_serialNumber)
#define X509_get_subject_name ABX_OSSL_CALL(X509_get_subject_name)
#define X509_getm_notAfter ABX_OSSL_CALL(X509_getm_notAfter)
#define X509_getm_notBefore ABX_OSSL_CALL(X509_getm_notBefore)
#define X509_gmtime_adj ABX_OSSL_CALL(X509_gmtime_adj)
#define X509_new ABX_OSSL_CALL(X509_new)
#define X509_set_issuer_name ABX_OSSL_CALL(X509_set_issuer_name)
#define X509_set_pubkey ABX_OSSL_CALL(X509_set_pubkey)
#define X509_set_version ABX_OSSL_CALL(X509_set_version)
#define X509_sign ABX_OSSL_CALL(X509_sign)
#endif

#endif
