/*
 * cli_mcp.c - gatehouse mcp list|tools|accept|reject: upstream MCP servers
 * from the shell. list shows each configured upstream's state as the
 * running server last recorded it; tools shows the pinned tool
 * definitions (one tool with --tool: both definitions of a held change,
 * for review); accept and reject decide on a held change, with its audit
 * row, and the running server picks the decision up within two seconds.
 *
 * Runs on the main thread; writes go through the store's writer lock, so
 * they are safe beside a running server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "json.h"
#include "mcp.h"
#include "store_mcp.h"
#include "util.h"

static const char usage_mcp[] =
	"usage: gatehouse mcp list   --config FILE\n"
	"       gatehouse mcp tools  --config FILE [--server NAME [--tool TOOL]]\n"
	"       gatehouse mcp accept --config FILE --server NAME --tool TOOL [--digest SHA256]\n"
	"       gatehouse mcp reject --config FILE --server NAME --tool TOOL [--digest SHA256]\n"
	"\n"
	"list    every upstream MCP server in the config: transport, state (as the running\n"
	"        server last recorded it), tools, session, last error, next retry.\n"
	"tools   the pinned tool definitions: exposed name, pin status (pinned, held,\n"
	"        rejected), digests, annotations and the approval default they set. With\n"
	"        --tool, the accepted and the offered definition of a held change in full.\n"
	"accept  makes a held tool's changed definition the pinned one: the tool is\n"
	"        offered again. --digest (the offered digest, from tools) makes sure\n"
	"        you accept exactly the definition you reviewed.\n"
	"reject  keeps the old pin; the tool stays held while the upstream offers the\n"
	"        rejected definition.\n"
	"TOOL is the upstream's tool name or the name gatehouse exposes.\n";

static int print_server(void *ud, const struct gh_mcp_server_row *r)
{
	cJSON *rows = ud, *o = cJSON_CreateObject();

	if (!o)
		return 1;
	cJSON_AddStringToObject(o, "name", r->name);
	cJSON_AddStringToObject(o, "state", r->state);
	cJSON_AddNumberToObject(o, "tools", (double)r->tools);
	cJSON_AddStringToObject(o, "session", r->session);
	cJSON_AddStringToObject(o, "error", r->last_error);
	cJSON_AddNumberToObject(o, "retry", (double)r->next_retry_at);
	cJSON_AddNumberToObject(o, "updated", (double)r->updated_at);
	cJSON_AddItemToArray(rows, o);
	return 0;
}

static const cJSON *row_named(const cJSON *rows, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, rows) {
		const char *n = gh_json_str(it, "name");

		if (n && !strcmp(n, name))
			return it;
	}
	return NULL;
}

static int mcp_list(struct gh_cli *c, struct gh_store *s)
{
	cJSON *rows = cJSON_CreateArray();
	struct gh_err e;
	size_t i;

	if (!rows || gh_store_mcp_server_list(s, print_server, rows, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", rows ? e.msg : "out of memory");
		cJSON_Delete(rows);
		return GH_EXIT_RUNTIME;
	}
	printf("%-20s %-9s %-11s %-6s %-40s %-24s %s\n", "NAME", "TRANSPORT", "STATE", "TOOLS",
	       "SESSION", "UPDATED", "LAST ERROR / NEXT RETRY");
	for (i = 0; i < c->cfg->nmcp_servers; i++) {
		const struct gh_mcp_server_conf *m = &c->cfg->mcp_servers[i];
		const cJSON *r = row_named(rows, m->name);
		char updated[GH_ISO8601_MAX] = "-", retry[GH_ISO8601_MAX] = "";
		const char *err = r ? gh_json_str(r, "error") : "";

		if (r)
			gh_iso8601((int64_t)gh_json_int(r, "updated", 0), updated, sizeof(updated));
		if (r && gh_json_int(r, "retry", 0) > 0)
			gh_iso8601((int64_t)gh_json_int(r, "retry", 0), retry, sizeof(retry));
		printf("%-20s %-9s %-11s %-6lld %-40.40s %-24s %s%s%s\n", m->name,
		       m->transport == GH_MCP_STDIO ? "stdio" : "http",
		       r ? gh_json_str(r, "state") : "never-run",
		       r ? (long long)gh_json_int(r, "tools", 0) : 0LL,
		       r && *gh_json_str(r, "session") ? gh_json_str(r, "session") : "-", updated,
		       err && *err ? err : "", retry[0] ? "; next retry " : "", retry);
	}
	cJSON_Delete(rows);
	return GH_EXIT_OK;
}

struct tools_ctx {
	const struct gh_config *cfg;
	const char *tool;              /* --tool: one tool in full */
	int n;
	int found;
};

static void print_definition(const char *title, const char *def)
{
	cJSON *v = gh_json_parse_stored(def);
	char *pretty = v ? cJSON_Print(v) : NULL;

	printf("%s:\n%s\n", title, pretty ? pretty : def);
	free(pretty);
	cJSON_Delete(v);
}

static int print_pin(void *ud, const struct gh_mcp_pin *p)
{
	struct tools_ctx *x = ud;
	const struct gh_mcp_server_conf *m = gh_config_mcp_server(x->cfg, p->server);
	char exposed[GH_MCP_NAME_MAX + 1] = "";
	cJSON *def = gh_json_parse_stored(p->pending_definition ? p->pending_definition
								: p->definition);
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(def, "annotations");
	char *annj = ann ? gh_json_dump(ann) : NULL;
	const char *status = p->pending_status[0] ? p->pending_status : "pinned";

	if (m)
		gh_mcp_expose_name(m->prefix, p->tool, exposed, NULL, 0);
	if (x->tool) {
		if (strcmp(x->tool, p->tool) && strcmp(x->tool, exposed)) {
			free(annj);
			cJSON_Delete(def);
			return 0;
		}
		x->found = 1;
		printf("server:   %s\ntool:     %s (exposed as %s)\nstatus:   %s\n", p->server,
		       p->tool, exposed[0] ? exposed : "-", status);
		printf("pinned:   %s\n", p->digest);
		if (p->pending_digest[0])
			printf("offered:  %s%s%s\n", p->pending_digest,
			       p->rejected_by[0] ? ", rejected by " : "", p->rejected_by);
		print_definition("accepted definition", p->definition);
		if (p->pending_definition)
			print_definition("offered definition", p->pending_definition);
	} else {
		if (!x->n++)
			printf("%-16s %-40s %-9s %-14s %-14s %-32s %s\n", "SERVER", "TOOL", "PIN",
			       "DIGEST", "OFFERED", "APPROVAL", "ANNOTATIONS");
		printf("%-16s %-40s %-9s %-14.12s %-14.12s %-32.32s %s\n", p->server,
		       exposed[0] ? exposed : p->tool, status, p->digest,
		       p->pending_digest[0] ? p->pending_digest : "-",
		       gh_mcp_hint_text(gh_mcp_hint_of(ann)), annj ? annj : "-");
	}
	free(annj);
	cJSON_Delete(def);
	return 0;
}

static int mcp_tools(struct gh_cli *c, struct gh_store *s, const char *server, const char *tool)
{
	struct tools_ctx x = {c->cfg, tool, 0, 0};
	struct gh_err e;

	if (gh_store_mcp_pin_list(s, server, print_pin, &x, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return GH_EXIT_RUNTIME;
	}
	if (tool && !x.found) {
		fprintf(stderr, "gatehouse: MCP server %s has no pinned tool \"%s\"\n", server, tool);
		return GH_EXIT_RUNTIME;
	}
	if (!tool && !x.n)
		printf("no pinned tools yet (tools are pinned when the server first lists them)\n");
	return GH_EXIT_OK;
}

static int mcp_decide(struct gh_cli *c, struct gh_store *s, const char *server, const char *tool,
		      const char *digest, int accept)
{
	const struct gh_mcp_server_conf *m = gh_config_mcp_server(c->cfg, server);
	struct gh_mcp_actor who = {"cli", NULL, "cli", "cli"};
	struct gh_err e;

	if (!m) {
		fprintf(stderr, "gatehouse: no MCP server \"%s\" in %s\n", server, c->config);
		return GH_EXIT_USAGE;
	}
	if (gh_mcp_pin_decide(s, m, tool, digest, accept, &who, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return GH_EXIT_RUNTIME;
	}
	printf("%s the changed definition of %s/%s; a running server offers the tool %s "
	       "within two seconds\n", accept ? "accepted" : "rejected", server, tool,
	       accept ? "again" : "no more while the upstream offers that definition,");
	return GH_EXIT_OK;
}

int gh_cmd_mcp(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *server = NULL, *tool = NULL, *digest = NULL, *cmd;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
				{"--server", 1, &server, NULL},   {"--tool", 1, &tool, NULL},
				{"--digest", 1, &digest, NULL},   {0}};
	struct gh_store *s = NULL;
	int help, rc, writes;

	if (argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
		fputs(usage_mcp, argc < 3 ? stderr : stdout);
		return argc < 3 ? GH_EXIT_USAGE : GH_EXIT_OK;
	}
	cmd = argv[2];
	if (strcmp(cmd, "list") && strcmp(cmd, "tools") && strcmp(cmd, "accept") &&
	    strcmp(cmd, "reject")) {
		fprintf(stderr, "gatehouse: unknown mcp command \"%s\"\n\n%s", cmd, usage_mcp);
		return GH_EXIT_USAGE;
	}
	if (gh_cli_parse(argc, argv, 3, opts, usage_mcp, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	writes = !strcmp(cmd, "accept") || !strcmp(cmd, "reject");
	if ((writes && (!server || !tool)) || (tool && !server)) {
		fprintf(stderr, "gatehouse: mcp %s needs --server NAME %s\n\n%s", cmd,
			writes ? "and --tool TOOL" : "with --tool", usage_mcp);
		return GH_EXIT_USAGE;
	}
	if (digest && (strlen(digest) != 64 || strspn(digest, "0123456789abcdef") != 64)) {
		fprintf(stderr, "gatehouse: --digest takes the 64 hex digits of a SHA-256\n");
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK ||
	    (writes && (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK)) {
		gh_cli_free(&c);
		return rc;
	}
	if (server && !gh_config_mcp_server(c.cfg, server)) {
		fprintf(stderr, "gatehouse: no MCP server \"%s\" in %s\n", server, c.config);
		gh_cli_free(&c);
		return GH_EXIT_USAGE;
	}
	if (!(s = gh_cli_store(&c, !writes, NULL))) {
		gh_cli_free(&c);
		return GH_EXIT_RUNTIME;
	}
	if (!strcmp(cmd, "list"))
		rc = mcp_list(&c, s);
	else if (!strcmp(cmd, "tools"))
		rc = mcp_tools(&c, s, server, tool);
	else
		rc = mcp_decide(&c, s, server, tool, digest, !strcmp(cmd, "accept"));
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}
