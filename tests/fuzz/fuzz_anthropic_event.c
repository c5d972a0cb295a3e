/*
 * fuzz_anthropic_event.c - the events of an Anthropic Messages stream
 * read two ways: by the wire's on_event, which reads text deltas and the
 * other common events from their text without a tree (the text-delta fast
 * path, then read_event over jread.c), and by on_event_tree, which reads
 * every event through its cJSON tree. Input: one event per line, "name
 * TAB data" (the SSE event: field, which stands in for a data without a
 * "type") or just its data, fed to two streams in order. Must never crash
 * or leak, and the two streams must end in the very same state after
 * every event (stream_checks.h): the same answer to each event, the text
 * and the text and tool deltas handed on, every call's id, name and
 * argument text, the finish reason, both token counts, the error.
 */
#include "stream_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stream_differential(gh_provider_anthropic.wire, GH_PROVIDER_ANTHROPIC, "anthropic", data,
			    size, 1);
	return 0;
}
