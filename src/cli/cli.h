/* cli.h — the subcommands of the `abx` binary. Each takes the arguments after its own
 * name and returns the process exit status: 0 success, 1 failure, 2 usage error. The
 * table that names them, and prints the usage from those names, is in main.c. */
#ifndef ABX_CLI_H
#define ABX_CLI_H

int abx_cli_call(int argc, char **argv);   /* call.c */
int abx_cli_mcp(int argc, char **argv);    /* mcp.c */
int abx_cli_ledger(int argc, char **argv); /* ledger.c */

#endif
