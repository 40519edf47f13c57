/* embed.c — a program that embeds abx: it creates a server from a config file,
 * registers one op of its own (demo.greet.run, with a path parameter read through the
 * jail), starts the server and serves until SIGINT/SIGTERM. Registering after start is
 * refused (RegistryFrozen), which it shows.
 *
 *   cc embed.c $(pkg-config --cflags --libs abx) -o embed && ./embed abx.yaml */
#include <abx/abx.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static abx_err greet(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    const char *who = json_string_value(json_object_get(args, "who"));
    json_t *out = json_pack("{s:s, s:s}", "greeting", "hello", "who", who);
    /* the canonical, admitted path: opened through the jail, never the raw argument */
    if (abx_ctx_path(ctx, "file")) {
        int fd = abx_ctx_open(ctx, "file", O_RDONLY, 0);
        if (fd < 0) {
            json_decref(out);
            return abx_reply_error(reply, ABX_E_FILES_NOT_FOUND, NULL, "cannot open the file");
        }
        char buf[4096];
        long total = 0, n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            total += n;
        close(fd);
        json_object_set_new(out, "file", json_string(abx_ctx_path(ctx, "file")));
        json_object_set_new(out, "bytes", json_integer(total));
    }
    abx_ctx_log(ctx, "info", "greeted %s", who);
    abx_reply_json(reply, out);
    return ABX_OK;
}

static const abx_param greet_params[] = {
    {"who", ABX_T_STRING, .required = true, .doc = "Whom to greet"},
    {"file", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "A file whose size to report"},
    {0},
};

static const abx_op_def demo_ops[] = {
    {.id = "demo.greet.run", .effects = ABX_EFF_READ, .summary = "Greet someone (and count a file's bytes)",
     .http = {"POST /demo/greet"}, .params = greet_params, .limits = ABX_LIM_RATE, .since = "0.1",
     .handler = greet},
    {0},
};

static const abx_op_def late_ops[] = {
    {.id = "demo.late.run", .effects = ABX_EFF_READ, .summary = "registered too late", .handler = greet},
    {0},
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CONFIG\n", argv[0]);
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    char err[2048];
    abx_server_opts o = {.config_path = argv[1], .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    if (!s || abx_registry_add(abx_server_registry(s), demo_ops, err, sizeof err) != 0 ||
        abx_server_start(s, err, sizeof err) != 0) {
        fprintf(stderr, "embed: %s\n", err);
        abx_server_free(s);
        return 1;
    }
    printf("listening on port %d\n", abx_server_port(s));
    if (abx_registry_add(abx_server_registry(s), late_ops, err, sizeof err) != 0)
        printf("late registration refused: %s\n", err);
    /* in-process call through the same pipeline */
    json_t *args = json_pack("{s:s}", "who", "in-process"), *body = NULL;
    int status = abx_server_call(s, "demo.greet.run", "alice", args, &body);
    char *text = json_dumps(body, JSON_COMPACT);
    printf("in-process: %d %s\n", status, text ? text : "");
    free(text);
    json_decref(body);
    json_decref(args);
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    abx_server_free(s);
    return 0;
}
