/*
 * fuzz_anthropic_delta.c - the Anthropic stream's fast path for text
 * deltas (gh_provider_anthropic_text_delta), which reads the most common
 * event without a JSON tree, against the full parse every other event
 * gets.
 *
 * The input is one event's data. Checks: whenever the fast path takes it,
 * the full parse (as streams are parsed: GH_JSON_UPSTREAM) accepts it too,
 * as an object of type "content_block_delta" with an integer index and a
 * delta of type "text_delta" whose text is exactly the bytes the fast path
 * points at (within the input); and a text delta the full parse reads with
 * no escape in its text, written in the API's own form, is taken.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "buf.h"
#include "err.h"
#include "json.h"
#include "provider_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data, *t = NULL, *full;
	const cJSON *delta, *index;
	size_t tl = 0;
	struct gh_err e;
	struct gh_buf b;
	cJSON *j = NULL;
	int fast = gh_provider_anthropic_text_delta(in, size, &t, &tl);

	if (fast) {
		CHECK(t >= in && tl <= size && (size_t)(t - in) <= size - tl);
		CHECK(gh_json_parse_opts(in, size, "chunk", GH_JSON_UPSTREAM, &j, &e) == GH_OK);
		CHECK(cJSON_IsObject(j));
		CHECK(!strcmp(gh_json_str(j, "type"), "content_block_delta"));
		index = cJSON_GetObjectItemCaseSensitive(j, "index");
		CHECK(gh_json_is_int(index) && index->valuedouble >= 0);
		delta = cJSON_GetObjectItemCaseSensitive(j, "delta");
		CHECK(!strcmp(gh_json_str(delta, "type"), "text_delta"));
		full = gh_json_str(delta, "text");
		CHECK(full && strlen(full) == tl && !memcmp(full, t, tl));
		cJSON_Delete(j);
		return 0;
	}
	/* the other way: a plain-text delta in the API's form is taken */
	if (gh_json_parse_opts(in, size, "chunk", GH_JSON_UPSTREAM, &j, &e) != GH_OK)
		return 0;
	delta = cJSON_GetObjectItemCaseSensitive(j, "delta");
	full = gh_json_str(delta, "text");
	index = cJSON_GetObjectItemCaseSensitive(j, "index");
	if (full && cJSON_IsObject(j) && gh_json_str(j, "type") &&
	    !strcmp(gh_json_str(j, "type"), "content_block_delta") && gh_json_is_int(index) &&
	    index->valuedouble >= 0 && index->valuedouble < 1e9 && gh_json_str(delta, "type") &&
	    !strcmp(gh_json_str(delta, "type"), "text_delta") && !strpbrk(full, "\"\\")) {
		size_t k;
		int plain = 1;

		for (k = 0; full[k]; k++)
			if ((unsigned char)full[k] < 0x20)
				plain = 0;
		gh_buf_init(&b, size + 256);
		if (plain && gh_buf_puts(&b, "{\"type\":\"content_block_delta\",\"index\":") == GH_BUF_OK &&
		    gh_buf_put_int(&b, (long long)index->valuedouble) == GH_BUF_OK &&
		    gh_buf_puts(&b, ",\"delta\":{\"type\":\"text_delta\",\"text\":\"") == GH_BUF_OK &&
		    gh_buf_puts(&b, full) == GH_BUF_OK && gh_buf_puts(&b, "\"}}") == GH_BUF_OK) {
			CHECK(gh_provider_anthropic_text_delta(b.data, b.len, &t, &tl));
			CHECK(tl == strlen(full) && !memcmp(t, full, tl));
		}
		gh_buf_free(&b);
	}
	cJSON_Delete(j);
	return 0;
}
