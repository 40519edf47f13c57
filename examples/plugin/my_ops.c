/* my_ops.c — an abx plugin: declares textstats.words.get, which counts the words of
 * a file the caller's statement admits (opened through the jail, never by the raw
 * argument). Built as a shared object and named in the config:
 *
 *   cc -shared -fPIC $(pkg-config --cflags abx) my_ops.c -o plugins/my_ops.so
 *   # abx.yaml:  load: ["my_ops"]      (plugin_dir defaults to ./plugins beside the config)
 *
 * It needs no libabx at link time: abx_* functions resolve against the abx binary (or
 * the program embedding libabx) that loads it. */
#include <abx/abx.h>
#include <ctype.h>
#include <fcntl.h>
#include <unistd.h>

static abx_err words_count(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)args; /* the admitted value comes from ctx */
    int fd = abx_ctx_open(ctx, "file", O_RDONLY, 0);
    if (fd < 0)
        return abx_reply_error(reply, ABX_E_FILES_NOT_FOUND, NULL, "cannot open %s", abx_ctx_path(ctx, "file"));
    char buf[8192];
    long n, words = 0, lines = 0;
    int in_word = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (long i = 0; i < n; i++) {
            unsigned char c = (unsigned char)buf[i];
            lines += c == '\n';
            if (isspace(c))
                in_word = 0;
            else if (!in_word) {
                in_word = 1;
                words++;
            }
        }
    close(fd);
    abx_reply_json(reply, json_pack("{s:s, s:I, s:I, s:s}", "file", abx_ctx_path(ctx, "file"), "words",
                                    (json_int_t)words, "lines", (json_int_t)lines, "by", abx_ctx_principal(ctx)));
    return ABX_OK;
}

static const abx_param count_params[] = {
    {"file", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "The text file to count"},
    {0},
};

static const abx_op_def my_ops[] = {
    {.id = "textstats.words.get", .effects = ABX_EFF_READ, .summary = "Count the words and lines of a file",
     .http = {"POST /textstats/words"}, .params = count_params, .since = "0.1", .handler = words_count},
    {0},
};

/* checked before registration: the abx version this plugin was written for */
const char *const abx_plugin_requires[] = {"abx:0.1", NULL};

int abx_plugin_register(abx_registry *reg, char *errbuf, size_t errlen)
{
    return abx_registry_add(reg, my_ops, errbuf, errlen);
}
