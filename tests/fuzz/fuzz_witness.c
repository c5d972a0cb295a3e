/*
 * fuzz_witness.c - the witness file's line parser, which `audit verify`
 * and serve's start-up check read a file with that may have been damaged
 * or written by someone else.
 *
 * The input is one line. Checks:
 *   - a line that parses formats back to itself byte for byte (the format
 *     is canonical: no two spellings of one checkpoint);
 *   - parsing never reads past len (the input is copied to an exact-size
 *     heap buffer, so ASan sees an overread), with or without the newline;
 *   - what parses has seq >= 1, a prev_seq below seq when chained.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit_witness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                  \
	do {                      \
		if (!(c))         \
			abort();  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_witness_entry w;
	char *line, back[GH_WITNESS_LINE_MAX];
	size_t n;

	if (size > GH_WITNESS_LINE_MAX * 2)
		return 0;
	line = malloc(size ? size : 1);
	if (!line)
		return 0;
	memcpy(line, data, size);
	if (gh_witness_parse(line, size, &w) == 0) {
		CHECK(w.c.seq >= 1);
		CHECK(!w.c.chained || (w.c.prev_seq >= 0 && w.c.prev_seq < w.c.seq));
		n = gh_witness_format(&w.c, w.c.chained ? w.prev_sig : NULL, back, sizeof(back));
		CHECK(n > 0);
		/* the same bytes, with or without the input's newline */
		CHECK(n == size + (size && line[size - 1] == '\n' ? 0 : 1));
		CHECK(memcmp(back, line, size) == 0);
	}
	free(line);
	return 0;
}
