/* cli.h — the subcommands of the `abx` binary. Each takes the arguments after its own
 * name and returns the process exit status: 0 success, 1 failure, 2 usage error. The
 * table that names them, and prints the usage from those names, is in main.c. */
#ifndef ABX_CLI_H
#define ABX_CLI_H

#include <stdio.h>

int abx_cli_call(int argc, char **argv);   /* call.c */
int abx_cli_mcp(int argc, char **argv);    /* mcp.c */
int abx_cli_ledger(int argc, char **argv); /* ledger.c */
int abx_cli_ops(int argc, char **argv);    /* ops.c */
int abx_cli_install(int argc, char **argv); /* install.c */
/* print op's parameters (the catalog's entry) to f; 1 and a message when there is no such op */
int abx_cli_op_help(const char *op, FILE *f); /* ops.c */

/* A row of the command table (main.c): `abx help`, the man page abx(1) and the bash
 * completion are all written from it. A row without help is not listed. */
typedef struct abx_cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* the arguments after the name; returns the exit status */
    const char *args;                  /* the synopsis after the name */
    const char *help;                  /* one line */
} abx_cli_command;
const abx_cli_command *abx_cli_commands(size_t *n); /* main.c */
/* abx manpage abx|abx.yaml: roff for man(1) from the command and config-key tables */
int abx_cli_manpage(int argc, char **argv); /* manpage.c */
/* abx completion bash: the bash completion script from the command table and the registry */
int abx_cli_completion(int argc, char **argv); /* completion.c */

#endif
