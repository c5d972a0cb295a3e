/*
 * fuzz_wire_agui.c - the AG-UI wire (wire_agui.c): a RunAgentInput parsed
 * into what the engine runs (the trailing tool messages of a continuation,
 * or the conversation with tool rounds told in words and what the thread
 * already holds), the client tools and the resume entries, and the
 * interrupts rendered back. Input: a request body. Must never crash or
 * leak, and what the wire accepts must be well-formed: CoreMessages the
 * engine's own normaliser takes, a continuation made of tool results only,
 * a new turn without them and with something new after history_len,
 * resume entries that name an interrupt (edited arguments only on an
 * approval), and interrupts that carry what a client needs to answer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "messages.h"
#include "wire_agui.h"
#include "wire_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every client tool, as the interrupt of a call to it waiting on each kind
 * of approver: an id, a reason, the call, the name the client knows. */
static void check_interrupts(const struct gh_agui_req *q)
{
	const cJSON *d;
	static const char *const approvers[] = {"caller", "admin"};

	cJSON_ArrayForEach(d, q->client_defs) {
		const char *name = gh_json_str(d, "name");
		const char *shown = gh_agui_client_name(q->client_defs, name);
		size_t i;

		CHECK(name && *name && strlen(name) <= 63);
		CHECK(shown && *shown);
		for (i = 0; i < 2; i++) {
			struct gh_agui_pending p = {"apr_1", "call_1", shown,
						    cJSON_GetObjectItemCaseSensitive(d, "parameters"),
						    "00", approvers[i], NULL, 1};
			cJSON *it = gh_agui_interrupt(&p), *md;
			char *txt;

			CHECK(it);
			md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
			CHECK(!strcmp(gh_json_str(it, "id"), "apr_1"));
			CHECK(gh_json_str(it, "reason") && gh_json_str(it, "expiresAt"));
			CHECK(!strcmp(gh_json_str(md, "toolName"), shown));
			CHECK(cJSON_GetObjectItemCaseSensitive(md, "input"));
			CHECK(!i == !!cJSON_GetObjectItemCaseSensitive(it, "responseSchema"));
			CHECK((txt = gh_json_dump(it)));
			free(txt);
			cJSON_Delete(it);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_agui_req q;
	cJSON *body = NULL, *ev;
	struct gh_err e;
	size_t i;

	if (gh_json_parse((const char *)data, size, "input", &body, &e) != GH_OK)
		return 0;
	if (gh_agui_parse(body, &q, &e) == GH_OK) {
		CHECK(q.thread_id && *q.thread_id && q.run_id && *q.run_id);
		CHECK(q.nresume <= GH_AGUI_RESUME_MAX);
		for (i = 0; i < q.nresume; i++) {
			const struct gh_agui_resume *r = &q.resume[i];

			CHECK(r->interrupt_id && *r->interrupt_id);
			CHECK(!r->edited_args || (r->approve && cJSON_IsObject(r->edited_args)));
			CHECK(!r->cancelled || !r->approve);
			CHECK(!r->reason || strlen(r->reason) <= GH_AGUI_REASON_MAX);
		}
		if (q.nresume) {
			CHECK(!q.messages);
		} else if (q.continuation) {
			check_core(q.messages, 0);
			CHECK(count_role(q.messages, "tool") == cJSON_GetArraySize(q.messages));
		} else {
			check_core(q.messages, 0);
			CHECK(count_role(q.messages, "tool") == 0);
			CHECK(q.history_len >= 0 &&
			      q.history_len < cJSON_GetArraySize(q.messages));
		}
		check_interrupts(&q);
	} else {
		CHECK(e.code == GH_E_BADREQ || e.code == GH_E_TOOBIG || e.code == GH_E_NOMEM);
		CHECK(!q.messages && !q.client_defs);
	}
	ev = gh_agui_event("RUN_STARTED", 1);
	CHECK(ev && !strcmp(gh_json_str(ev, "type"), "RUN_STARTED"));
	cJSON_Delete(ev);
	gh_agui_req_free(&q);
	cJSON_Delete(body);
	return 0;
}
