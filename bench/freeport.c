/* freeport.c — print N distinct free TCP ports on 127.0.0.1, one a line.
 * usage: freeport [N]   (1..16, default 1)
 * Each port comes from bind(127.0.0.1:0); all sockets stay open until every port
 * is chosen, so the N ports differ. They are closed (never listened on) at exit,
 * so the caller can bind them right away. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    if (n < 1 || n > 16) {
        fprintf(stderr, "usage: freeport [N]  (1..16)\n");
        return 1;
    }
    int fds[16];
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof a) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&a, &len) != 0) {
            perror("freeport");
            return 1;
        }
        printf("%d\n", ntohs(a.sin_port));
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return 0;
}
