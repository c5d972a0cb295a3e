/*
 * fuzz_openai_chunk.c - the chunks of an OpenAI chat completion stream
 * read two ways: by the wire's on_event, which reads the common ones from
 * their text without a tree (read_chunk, over jread.c), and by
 * on_event_tree, which reads every chunk through its cJSON tree. Input:
 * one chunk's data per line, fed to two streams in order. Must never
 * crash or leak, and the two streams must end in the very same state
 * after every chunk (stream_checks.h): the same answer to each chunk, the
 * text and the deltas handed on, every call's id, name and argument text,
 * the finish reason, both token counts, the error.
 */
#include "stream_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stream_differential(gh_provider_openai.wire, GH_PROVIDER_OPENAI, "openai", data, size, 0);
	return 0;
}
