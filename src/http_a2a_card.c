/*
 * http_a2a_card.c - A2A agent cards (public), so A2A clients find an agent
 * and how to talk to it:
 *   GET /.well-known/agent-card.json              the default agent's card
 *   GET /a2a/:agentId/.well-known/agent-card.json an agent's card
 * (and the older agent.json names). Cards announce server.public_url, else
 * the listen address (never the request's Host). The card follows
 * A2A-Version: 1.x gets
 * the 1.0 card, 0.x or no header the 0.3 card (which also lists the 1.0
 * interfaces). Both declare the client-tools extension (wire_a2a.h).
 * Per request, on the worker thread.
 */
#include <stdio.h>
#include <string.h>

#include <civetweb.h>

#include "http.h"
#include "json.h"
#include "util.h"
#include "wire_a2a.h"

void gh_a2a_base_url(const struct gh_app *app, int port, char *out, size_t cap)
{
	const char *pub = gh_app_cfg(app)->server.public_url;
	const char *listen = app->listen ? app->listen : gh_app_cfg(app)->server.listen;
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	char host[256];
	size_t n = colon ? (size_t)(colon - listen) : 0;

	if (pub && *pub) {
		gh_strlcpy(out, pub, cap);
		n = strlen(out);
		while (n > 0 && out[n - 1] == '/')
			out[--n] = '\0';
		return;
	}
	/* the Host header is the client's to say: a card built from it would
	 * send other clients wherever the asker liked */
	if (n >= sizeof(host))
		n = sizeof(host) - 1;
	if (n)
		memcpy(host, listen, n);
	host[n] = '\0';
	if (!n || !strcmp(host, "0.0.0.0"))
		gh_strlcpy(host, "127.0.0.1", sizeof(host));
	else if (!strcmp(host, "[::]"))
		gh_strlcpy(host, "[::1]", sizeof(host));
	snprintf(out, cap, "http://%s:%d", host, port);
}

/* Where clients reach gatehouse: the port is the one this request came in
 * on (a listening port: port 0 in the config means one picked at start). */
static void base_url(struct gh_req *r, char *out, size_t cap)
{
	gh_a2a_base_url(r->app, r->ri->server_port, out, cap);
}

static cJSON *iface(const char *url, const char *version)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "url", url);
	cJSON_AddStringToObject(o, "protocolBinding", "JSONRPC");
	cJSON_AddStringToObject(o, "protocolVersion", version);
	return o;
}

static cJSON *string_array(const char *const *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
	return a;
}

static cJSON *card_json(struct gh_req *r, const struct gh_agent_conf *a, enum gh_a2a_dialect d)
{
	static const char *const modes[] = {"text/plain", "application/json"};
	static const char *const tags[] = {"gatehouse", "agent"};
	cJSON *o = cJSON_CreateObject(), *arr, *caps, *ext, *sch, *bearer, *skill, *prov;
	char base[512], url[1024], desc[512];

	if (!o)
		return NULL;
	base_url(r, base, sizeof(base));
	snprintf(url, sizeof(url), "%s/a2a/%s", base, a->id);
	if (a->description && *a->description)
		gh_strlcpy(desc, a->description, sizeof(desc));
	else
		snprintf(desc, sizeof(desc), "%s, served by gatehouse", a->name);
	cJSON_AddStringToObject(o, "name", a->name);
	cJSON_AddStringToObject(o, "description", desc);
	if (d == GH_A2A_V03) {
		cJSON_AddStringToObject(o, "protocolVersion", "0.3.0");
		cJSON_AddStringToObject(o, "url", url);
		cJSON_AddStringToObject(o, "preferredTransport", "JSONRPC");
	}
	arr = cJSON_AddArrayToObject(o, "supportedInterfaces");
	cJSON_AddItemToArray(arr, iface(url, "1.0"));
	cJSON_AddItemToArray(arr, iface(url, "0.3"));
	prov = cJSON_AddObjectToObject(o, "provider");
	cJSON_AddStringToObject(prov, "organization", "gatehouse");
	cJSON_AddStringToObject(prov, "url", base);
	cJSON_AddStringToObject(o, "version", GH_VERSION);
	caps = cJSON_AddObjectToObject(o, "capabilities");
	cJSON_AddBoolToObject(caps, "streaming", 1);
	cJSON_AddBoolToObject(caps, "pushNotifications", 0);
	arr = cJSON_AddArrayToObject(caps, "extensions");
	ext = cJSON_CreateObject();
	cJSON_AddStringToObject(ext, "uri", GH_A2A_EXT_TOOLS_URI);
	cJSON_AddStringToObject(ext, "description", GH_A2A_EXT_TOOLS_DESC);
	cJSON_AddBoolToObject(ext, "required", 0);
	cJSON_AddItemToArray(arr, ext);
	sch = cJSON_AddObjectToObject(o, "securitySchemes");
	bearer = cJSON_AddObjectToObject(sch, "bearer");
	if (d == GH_A2A_V10) {
		cJSON *h = cJSON_AddObjectToObject(bearer, "httpAuthSecurityScheme");

		cJSON_AddStringToObject(h, "description", "A gatehouse API key");
		cJSON_AddStringToObject(h, "scheme", "Bearer");
		cJSON_AddStringToObject(h, "bearerFormat", "gatehouse API key");
		arr = cJSON_AddArrayToObject(o, "securityRequirements");
		sch = cJSON_CreateObject();
		bearer = cJSON_AddObjectToObject(cJSON_AddObjectToObject(sch, "schemes"), "bearer");
		cJSON_AddArrayToObject(bearer, "list");
		cJSON_AddItemToArray(arr, sch);
	} else {
		cJSON_AddStringToObject(bearer, "type", "http");
		cJSON_AddStringToObject(bearer, "scheme", "bearer");
		cJSON_AddStringToObject(bearer, "bearerFormat", "gatehouse API key");
		cJSON_AddStringToObject(bearer, "description", "A gatehouse API key");
		arr = cJSON_AddArrayToObject(o, "security");
		sch = cJSON_CreateObject();
		cJSON_AddArrayToObject(sch, "bearer");
		cJSON_AddItemToArray(arr, sch);
	}
	cJSON_AddItemToObject(o, "defaultInputModes", string_array(modes, GH_ARRAY_LEN(modes)));
	cJSON_AddItemToObject(o, "defaultOutputModes", string_array(modes, GH_ARRAY_LEN(modes)));
	arr = cJSON_AddArrayToObject(o, "skills");
	skill = cJSON_CreateObject();
	cJSON_AddStringToObject(skill, "id", a->id);
	cJSON_AddStringToObject(skill, "name", a->name);
	cJSON_AddStringToObject(skill, "description", desc);
	cJSON_AddItemToObject(skill, "tags", string_array(tags, GH_ARRAY_LEN(tags)));
	cJSON_AddItemToArray(arr, skill);
	return o;
}

static void send_card(struct gh_req *r, const char *agent_id)
{
	const struct gh_agent_conf *a = gh_config_agent(gh_app_cfg(r->app), agent_id);
	const char *ver = gh_http_header(r, "A2A-Version");
	cJSON *card;

	if (!a) {
		gh_http_errorf(r, GH_E_NOTFOUND, "no agent \"%s\"", agent_id);
		return;
	}
	/* 1.x asks for the 1.0 card; no header means a 0.3 client */
	card = card_json(r, a, ver && ver[0] >= '1' && ver[0] <= '9' ? GH_A2A_V10 : GH_A2A_V03);
	if (!card) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	r->extra_headers = "Vary: A2A-Version\r\n";
	gh_http_json(r, 200, card);
	r->extra_headers = NULL;
	cJSON_Delete(card);
}

static void default_card(struct gh_req *r)
{
	send_card(r, gh_app_cfg(r->app)->default_agent);
}

static void agent_card(struct gh_req *r)
{
	send_card(r, r->params[0]);
}

const struct gh_route gh_routes_a2a_cards[] = {
	{"GET", "/.well-known/agent-card.json", GH_AUTH_NONE, default_card},
	{"GET", "/.well-known/agent.json", GH_AUTH_NONE, default_card},
	{"GET", "/a2a/:id/.well-known/agent-card.json", GH_AUTH_NONE, agent_card},
	{"GET", "/a2a/:id/.well-known/agent.json", GH_AUTH_NONE, agent_card},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
