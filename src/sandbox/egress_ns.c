/* egress_ns.c — the sockets of a process's egress proxy, made by its child inside the
 * child's fresh network namespace before exec (spawn.c), and the host's nameservers that
 * become addresses of its loopback so a resolver configured in /etc/resolv.conf reaches
 * the proxy's resolver (transparent mode, docs/egress.md). The child-side function only
 * makes system calls: the child shares abx's memory. */
#include "sandbox/sandbox_int.h"
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

size_t abx__egress_ns_nameservers(uint32_t out[ABX_EGRESS_NS_MAX])
{
    FILE *f = fopen("/etc/resolv.conf", "re");
    size_t n = 0;
    char line[256], addr[64];
    while (f && n < ABX_EGRESS_NS_MAX && fgets(line, sizeof line, f)) {
        struct in_addr a;
        if (sscanf(line, " nameserver %63s", addr) == 1 && inet_pton(AF_INET, addr, &a) == 1 &&
            (ntohl(a.s_addr) >> 24) != 127)
            out[n++] = a.s_addr; /* loopback ones are on lo already */
    }
    if (f)
        fclose(f);
    return n;
}

/* addr (network order) as an address of lo with a /32 mask, label lo:N */
static int lo_alias(int s, size_t i, uint32_t addr)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo:", 3);
    ifr.ifr_name[3] = (char)('1' + i);
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = addr;
    if (ioctl(s, SIOCSIFADDR, &ifr) != 0)
        return -1;
    sin->sin_addr.s_addr = 0xffffffffu;
    return ioctl(s, SIOCSIFNETMASK, &ifr);
}

static int listener(int type, uint32_t addr, int port)
{
    int l = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (l < 0)
        return -1;
    int one = 1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = addr;
    if (setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || (type == SOCK_STREAM && listen(l, 128) != 0)) {
        int e = errno;
        close(l);
        errno = e;
        return -1;
    }
    return l;
}

int abx__egress_ns_setup(int sock, const abx_confine *c, const uint32_t *ns, size_t nns)
{
    int fds[ABX_EGRESS_LISTEN_MAX];
    size_t n = 0;
    int rc = -1, e = 0;
    if ((fds[n] = listener(SOCK_STREAM, htonl(INADDR_LOOPBACK), c->egress_port)) < 0)
        goto out;
    n++;
    if (c->egress_dns) {
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            goto out;
        for (size_t i = 0; i < nns; i++)
            if (lo_alias(s, i, ns[i]) != 0) {
                e = errno;
                close(s);
                errno = e;
                goto out;
            }
        close(s);
        if ((fds[n] = listener(SOCK_DGRAM, htonl(INADDR_ANY), 53)) < 0)
            goto out;
        n++;
        if ((fds[n] = listener(SOCK_STREAM, htonl(INADDR_ANY), 53)) < 0)
            goto out;
        n++;
    }
    for (size_t i = 0; i < c->n_egress_tports && n < ABX_EGRESS_LISTEN_MAX; i++) {
        if ((fds[n] = listener(SOCK_STREAM, htonl(INADDR_ANY), c->egress_tports[i])) < 0)
            goto out;
        n++;
    }
    union {
        char buf[CMSG_SPACE(sizeof(int) * ABX_EGRESS_LISTEN_MAX)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    char tag = 'L';
    struct iovec iov = {.iov_base = &tag, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
    rc = sendmsg(sock, &m, 0) == 1 ? 0 : -1;
out:
    e = errno;
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    errno = e;
    return rc;
}

int abx__egress_ns_receive(int sock, const abx_confine *c, abx_egress_listeners *out)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * ABX_EGRESS_LISTEN_MAX)];
        struct cmsghdr align;
    } u;
    char tag;
    struct iovec iov = {.iov_base = &tag, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    out->n = 0;
    if (recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(sizeof(int)))
        return -1;
    size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    memcpy(out->fd, CMSG_DATA(cm), n * sizeof(int));
    out->n = n;
    size_t want = 1 + (c->egress_dns ? 2 : 0) + c->n_egress_tports;
    if (want > ABX_EGRESS_LISTEN_MAX)
        want = ABX_EGRESS_LISTEN_MAX;
    size_t k = 0;
    out->kind[k++] = ABX_EGL_PROXY;
    if (c->egress_dns) {
        out->kind[k++] = ABX_EGL_DNS_UDP;
        out->kind[k++] = ABX_EGL_DNS_TCP;
    }
    while (k < n)
        out->kind[k++] = ABX_EGL_TRANSPARENT;
    if (n != want || (m.msg_flags & MSG_CTRUNC)) {
        for (size_t i = 0; i < n; i++)
            close(out->fd[i]);
        out->n = 0;
        return -1;
    }
    return 0;
}
