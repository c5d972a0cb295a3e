/*
 * test_messages.c - CoreMessages: the text of a message's content (a
 * string, or the text of its text parts run together).
 */
#include "messages.h"

#include <stdlib.h>

#include "t.h"
#include "util.h"

static void test_content_text(void)
{
	static const char *const cases[][2] = {
		{"\"plain words\"", "plain words"},
		{"[{\"type\":\"text\",\"text\":\"Hello, \"},{\"type\":\"tool-call\",\"text\":\"no\","
		 "\"toolName\":\"f\"},{\"type\":\"text\",\"text\":\"world\"}]", "Hello, world"},
		{"[{\"type\":\"tool-call\",\"toolName\":\"f\"}]", ""},
		{"[]", ""},
		{"{\"type\":\"text\",\"text\":\"an object is not parts\"}", ""},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(cases); i++) {
		cJSON *c = cJSON_Parse(cases[i][0]);
		char *t = gh_messages_text(c);

		T_ASSERT(c);
		T_EQ_STR(t, cases[i][1]);
		free(t);
		cJSON_Delete(c);
	}
	{
		char *t = gh_messages_text(NULL);

		T_EQ_STR(t, "");
		free(t);
	}
}

T_MAIN(T(test_content_text))
