/*
 * cli.h - the gatehouse command line: serve, migrate, keys, audit, admin.
 * What the commands share (options, config, store) is in cli_common.h.
 *
 * Exit codes: 0 ok, 1 runtime error, 2 usage error. Every command takes
 * --help. Runs on the main thread.
 */
#ifndef GH_CLI_H
#define GH_CLI_H

/* Runs the command argv names; returns the process exit code. */
int gh_cli_main(int argc, char **argv);

#endif
