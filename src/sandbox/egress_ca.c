/* egress_ca.c — the per-server CA of credential injection (see egress_tls.h): an ECDSA
 * P-256 key and a self-signed certificate made at first start and kept in abx's state
 * folder (the key mode 0600), reused after; a bundle of the system store plus the CA for
 * processes; leaf certificates for intercepted hosts, signed on demand and cached. */
#include "sandbox/egress_tls.h"
#include "sandbox/egress_ca_int.h"

#include "core/util.h"
#include "sandbox/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sandbox/ossl_lazy.h" /* last: OpenSSL, opened on first use */

#define LEAF_CACHE 64

struct abx_egress_ca {
    EVP_PKEY *key, *leaf_key;
    X509 *cert;
    char cert_path[4096], bundle_path[4096];
    pthread_mutex_t mu;
    struct {
        char host[ABX_EGRESS_HOST_MAX];
        X509 *x;
    } leafs[LEAF_CACHE];
    unsigned next;
};

static void ssl_err(char *err, size_t errlen, const char *what, const char *path)
{
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    else if (errno)
        snprintf(buf, sizeof buf, "%s", strerror(errno));
    snprintf(err, errlen, "egress CA: %s %s: %s", what, path, buf);
    ERR_clear_error();
}

static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v;
    X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

static bool set_serial(X509 *x)
{
    unsigned char r[16];
    if (RAND_bytes(r, sizeof r) != 1)
        return false;
    r[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(r, sizeof r, NULL);
    bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    return ok;
}

/* a certificate for key, named cn, valid from an hour ago for days, signed by
 * (issuer, ikey) or by itself */
static X509 *make_cert(EVP_PKEY *key, const char *cn, long days, X509 *issuer, EVP_PKEY *ikey)
{
    X509 *x = X509_new();
    if (!x || !X509_set_version(x, 2) || !set_serial(x) || !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), days * 86400L) || !X509_set_pubkey(x, key))
        goto fail;
    X509_NAME *n = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0))
        goto fail;
    if (!X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n))
        goto fail;
    bool ok;
    if (!issuer) {
        ok = add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_ext(x, x, NID_subject_key_identifier, "hash");
    } else {
        char san[ABX_EGRESS_HOST_MAX + 8];
        abx_ip ip;
        snprintf(san, sizeof san, "%s:%s", abx_ip_parse(cn, &ip) ? "IP" : "DNS", cn);
        ok = add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, issuer, NID_key_usage, "critical,digitalSignature") &&
             add_ext(x, issuer, NID_ext_key_usage, "serverAuth") && add_ext(x, issuer, NID_subject_alt_name, san) &&
             add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
    }
    if (ok && X509_sign(x, issuer ? ikey : key, EVP_sha256()))
        return x;
fail:
    X509_free(x);
    return NULL;
}

static bool write_file(const char *path, int mode, void (*fn)(FILE *, void *), void *arg)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    fn(f, arg);
    bool ok = !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        return true;
    unlink(tmp);
    return false;
}

static void put_key(FILE *f, void *k) { PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL); }
static void put_cert(FILE *f, void *x) { PEM_write_X509(f, x); }

/* the system store's file: what OpenSSL reads by default (Debian: ca-certificates.crt) */
static void put_bundle(FILE *f, void *x)
{
    const char *sys = X509_get_default_cert_file();
    FILE *in = fopen(sys, "r");
    if (in) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, f);
        fclose(in);
        fputc('\n', f);
    }
    fputs("# abx egress CA (credential injection)\n", f);
    PEM_write_X509(f, x);
}

static bool load_existing(abx_egress_ca *ca, const char *keyp, char *err, size_t errlen)
{
    FILE *f = fopen(keyp, "re");
    struct stat st;
    if (!f)
        return false;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077)) {
        fchmod(fileno(f), 0600); /* it must stay private */
    }
    ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    f = fopen(ca->cert_path, "re");
    if (f) {
        ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
        fclose(f);
    }
    if (!ca->key || !ca->cert || X509_check_private_key(ca->cert, ca->key) != 1 ||
        X509_cmp_current_time(X509_get0_notAfter(ca->cert)) <= 0) {
        EVP_PKEY_free(ca->key);
        X509_free(ca->cert);
        ca->key = NULL;
        ca->cert = NULL;
        ERR_clear_error();
        return false; /* unreadable, mismatched or expired: made anew */
    }
    (void)err;
    (void)errlen;
    return true;
}

abx_egress_ca *abx_egress_ca_open(const char *dir, char *err, size_t errlen)
{
    if (abx_ossl_load(err, errlen) != 0)
        return NULL;
    abx_egress_ca *ca = abx_calloc(1, sizeof *ca);
    if (!ca) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&ca->mu, NULL);
    char keyp[4200];
    snprintf(keyp, sizeof keyp, "%s/egress-ca.key", dir);
    snprintf(ca->cert_path, sizeof ca->cert_path, "%s/egress-ca.pem", dir);
    snprintf(ca->bundle_path, sizeof ca->bundle_path, "%s/egress-ca-bundle.pem", dir);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        ssl_err(err, errlen, "cannot make", dir);
        goto fail;
    }
    if (!load_existing(ca, keyp, err, errlen)) {
        char host[64] = "", cn[128];
        gethostname(host, sizeof host - 1);
        snprintf(cn, sizeof cn, "abx egress CA (%s)", host[0] ? host : "local");
        errno = 0;
        if (!(ca->key = EVP_EC_gen("P-256")) || !(ca->cert = make_cert(ca->key, cn, 3650, NULL, NULL))) {
            ssl_err(err, errlen, "cannot make", "a key");
            goto fail;
        }
        if (!write_file(keyp, 0600, put_key, ca->key) || !write_file(ca->cert_path, 0644, put_cert, ca->cert)) {
            ssl_err(err, errlen, "cannot write", dir);
            goto fail;
        }
    }
    if (!write_file(ca->bundle_path, 0644, put_bundle, ca->cert)) {
        ssl_err(err, errlen, "cannot write", ca->bundle_path);
        goto fail;
    }
    if (!(ca->leaf_key = EVP_EC_gen("P-256"))) {
        ssl_err(err, errlen, "cannot make", "a leaf key");
        goto fail;
    }
    return ca;
fail:
    abx_egress_ca_free(ca);
    return NULL;
}

void abx_egress_ca_free(abx_egress_ca *ca)
{
    if (!ca)
        return;
    EVP_PKEY_free(ca->key);
    EVP_PKEY_free(ca->leaf_key);
    X509_free(ca->cert);
    for (size_t i = 0; i < LEAF_CACHE; i++)
        X509_free(ca->leafs[i].x);
    pthread_mutex_destroy(&ca->mu);
    abx_free(ca);
}

const char *abx_egress_ca_cert_path(const abx_egress_ca *ca) { return ca->cert_path; }
const char *abx_egress_ca_bundle_path(const abx_egress_ca *ca) { return ca->bundle_path; }

size_t abx_egress_ca_env(const abx_egress_ca *ca, abx_env_pair out[ABX_EGRESS_CA_ENV])
{
    out[0] = (abx_env_pair){"SSL_CERT_FILE", ca->bundle_path};
    out[1] = (abx_env_pair){"REQUESTS_CA_BUNDLE", ca->bundle_path};
    out[2] = (abx_env_pair){"CURL_CA_BUNDLE", ca->bundle_path};
    out[3] = (abx_env_pair){"GIT_SSL_CAINFO", ca->bundle_path};
    out[4] = (abx_env_pair){"NODE_EXTRA_CA_CERTS", ca->cert_path};
    return ABX_EGRESS_CA_ENV;
}

/* Put host's leaf certificate and key on ssl (cached: at most LEAF_CACHE hosts, the
 * oldest replaced). false when signing failed. */
bool abx_egress_ca_use_leaf(abx_egress_ca *ca, SSL *ssl, const char *host)
{
    pthread_mutex_lock(&ca->mu);
    X509 *x = NULL;
    time_t soon = time(NULL) + 86400;
    unsigned s = LEAF_CACHE;
    for (unsigned i = 0; i < LEAF_CACHE && !x; i++)
        if (ca->leafs[i].x && strcmp(ca->leafs[i].host, host) == 0) {
            s = i; /* a leaf within a day of its end is made anew in its slot */
            if (X509_cmp_time(X509_get0_notAfter(ca->leafs[i].x), &soon) > 0)
                x = ca->leafs[i].x;
        }
    if (!x && (x = make_cert(ca->leaf_key, host, 30, ca->cert, ca->key))) {
        if (s == LEAF_CACHE)
            s = ca->next++ % LEAF_CACHE;
        X509_free(ca->leafs[s].x);
        ca->leafs[s].x = x;
        snprintf(ca->leafs[s].host, sizeof ca->leafs[s].host, "%s", host);
    }
    bool ok = x && SSL_use_certificate(ssl, x) == 1 && SSL_use_PrivateKey(ssl, ca->leaf_key) == 1;
    pthread_mutex_unlock(&ca->mu);
    return ok;
}
