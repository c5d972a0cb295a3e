/*
 * harness.h - what the fuzz targets share: CHECK (a failed property is a
 * crash libFuzzer reports) and a member-order shuffle for the properties
 * that say order must not matter.
 */
#ifndef GH_FUZZ_HARNESS_H
#define GH_FUZZ_HARNESS_H

#include <stdlib.h>

#include <cjson/cJSON.h>

#define CHECK(c)                  \
	do {                      \
		if (!(c))         \
			abort();  \
	} while (0)

/* Reverses the members of every object in v, in place (arrays keep their
 * order: it is part of their value). Recursive: callers pass trees read by
 * gh_json_parse, at most GH_JSON_MAX_DEPTH deep. */
static inline void reverse_members(cJSON *v)
{
	cJSON *c, *next, *head = NULL, *tail;

	for (c = v->child; c; c = c->next)
		reverse_members(c);
	if (!cJSON_IsObject(v) || !v->child)
		return;
	tail = v->child;
	for (c = v->child; c; c = next) {
		next = c->next;
		c->next = head;
		if (head)
			head->prev = c;
		head = c;
	}
	head->prev = tail; /* cJSON: the first child's prev is the last */
	v->child = head;
}

/* A copy of v with every object's members reversed; caller frees. */
static inline cJSON *reversed_copy(const cJSON *v)
{
	cJSON *r = cJSON_Duplicate(v, 1);

	CHECK(r);
	reverse_members(r);
	return r;
}

#endif
