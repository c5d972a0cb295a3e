/*
 * embed.h - files compiled into the binary at build time.
 *
 * cmake/embed.cmake generates the tables from the migrations/ .sql files and
 * web-admin/. Each table ends with an entry whose name is NULL. The data is
 * NUL-terminated (len excludes the terminator), read-only and lives for the
 * life of the process.
 */
#ifndef GH_EMBED_H
#define GH_EMBED_H

#include <stddef.h>

struct gh_embedded {
	const char *name;          /* "0001_init.sql", "index.html", "js/app.js" */
	const unsigned char *data;
	size_t len;
};

extern const struct gh_embedded gh_embedded_migrations[];     /* migrations/sqlite */
extern const struct gh_embedded gh_embedded_pg_migrations[];  /* migrations/postgres */
extern const struct gh_embedded gh_embedded_web[];

#endif
