/*
 * main.c - gatehouse: a self-hosted agent gateway in one binary.
 * Everything starts in cli.c.
 */
#include "cli.h"

int main(int argc, char **argv)
{
	return gh_cli_main(argc, argv);
}
