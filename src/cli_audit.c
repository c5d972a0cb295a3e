/*
 * cli_audit.c - gatehouse audit tail|query|export|verify|reindex|pubkey.
 *
 * Reads go through a read-only connection, so these commands are safe
 * beside a running server; reindex writes, taking turns with the server's
 * writer one block at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "audit_index.h"
#include "audit_verify.h"
#include "cli_common.h"
#include "json.h"
#include "util.h"

static const char usage_audit[] =
	"usage: gatehouse audit tail   --config FILE [-n N]\n"
	"       gatehouse audit query  --config FILE [filters] [--limit N] [--before SEQ]\n"
	"                              [--format table|ndjson|csv]\n"
	"       gatehouse audit export --config FILE [filters] [--format ndjson|csv]\n"
	"       gatehouse audit verify --config FILE [--pubkey HEX] [--witness FILE]\n"
	"       gatehouse audit reindex --config FILE\n"
	"       gatehouse audit pubkey --config FILE\n"
	"\n"
	"filters: --from TIME --to TIME (ISO-8601 UTC or Unix ms) --key KEY_ID|NAME\n"
	"         --agent ID --thread ID --run ID --tool NAME --event EVENT --outcome OUTCOME\n"
	"         --key takes a key's id or its name (a name two keys share is refused).\n"
	"         --event takes an event of the audit log (README: The audit log);\n"
	"         an unknown one is refused with the list of events.\n"
	"\n"
	"tail    the newest N rows (default 20), oldest of them first.\n"
	"query   one page, newest first; prints the cursor for the next page.\n"
	"export  every matching row, oldest first, streamed.\n"
	"verify  recomputes the hash chain and checks the signed checkpoints (each\n"
	"        signs the one before it); prints the first bad row. Fails when rows\n"
	"        after the newest checkpoint are more or older than the writer ever\n"
	"        leaves unsigned, and when the witness saw a checkpoint the database\n"
	"        does not have. Also checks the filter index that queries use against\n"
	"        the rows. Exit 0 only when both are intact. --pubkey pins the signing\n"
	"        key (default: the key file beside the database, when readable).\n"
	"        --witness reads that witness file (a copy from elsewhere, say)\n"
	"        instead of audit.witness.file, and fails when it is missing.\n"
	"reindex rebuilds the filter index from the rows (after verify reports it\n"
	"        damaged); queries stay correct meanwhile, only slower.\n"
	"pubkey  prints the Ed25519 public key that signs checkpoints (hex).\n";

struct filter_opts {
	const char *from, *to, *key, *agent, *thread, *run, *tool, *event, *outcome;
};

static int build_filter(const struct filter_opts *f, struct gh_audit_filter *out)
{
	memset(out, 0, sizeof(*out));
	if (f->from && gh_parse_time(f->from, &out->from_ms) != 0) {
		fprintf(stderr, "gatehouse: --from: expected ISO-8601 UTC or Unix ms\n");
		return -1;
	}
	if (f->to && gh_parse_time(f->to, &out->to_ms) != 0) {
		fprintf(stderr, "gatehouse: --to: expected ISO-8601 UTC or Unix ms\n");
		return -1;
	}
	if (f->event && !gh_str_in(gh_audit_event_names, f->event)) {
		size_t i;

		fprintf(stderr, "gatehouse: --event: no event is called \"%s\"; events:", f->event);
		for (i = 0; gh_audit_event_names[i]; i++)
			fprintf(stderr, " %s", gh_audit_event_names[i]);
		fputc('\n', stderr);
		return -1;
	}
	out->key_id = f->key;
	out->agent_id = f->agent;
	out->thread_id = f->thread;
	out->run_id = f->run;
	out->tool_name = f->tool;
	out->event = f->event;
	out->outcome = f->outcome;
	return 0;
}

enum fmt { FMT_TABLE, FMT_NDJSON, FMT_CSV };

/* --format for what: query takes table, ndjson or csv; tail table or
 * ndjson; export ndjson (its default) or csv. */
static int parse_format(const char *what, const char *s, enum fmt *out)
{
	int is_export = !strcmp(what, "export"), is_tail = !strcmp(what, "tail");

	if (!s)
		*out = is_export ? FMT_NDJSON : FMT_TABLE;
	else if (!strcmp(s, "table") && !is_export)
		*out = FMT_TABLE;
	else if (!strcmp(s, "ndjson") || !strcmp(s, "json"))
		*out = FMT_NDJSON;
	else if (!strcmp(s, "csv") && !is_tail)
		*out = FMT_CSV;
	else {
		fprintf(stderr, "gatehouse: --format: audit %s writes %s, not \"%s\"\n", what,
			is_export ? "ndjson or csv" : is_tail ? "table or ndjson"
							      : "table, ndjson or csv", s);
		return -1;
	}
	return 0;
}

/* A whole number in min..max for option name, or a message naming it. */
static int parse_num(const char *name, const char *s, int64_t min, int64_t max, int64_t *out)
{
	if (!s || gh_parse_i64(s, min, max, out) == 0)
		return 0;
	if (max == INT64_MAX)
		fprintf(stderr, "gatehouse: %s: expected a whole number from %lld up, got \"%s\"\n",
			name, (long long)min, s);
	else
		fprintf(stderr, "gatehouse: %s: expected a whole number in %lld..%lld, got \"%s\"\n",
			name, (long long)min, (long long)max, s);
	return -1;
}

/* --key takes a key's id or its name: the id of the one key so named, into
 * id. A name two keys share, or no key at all, is a usage error. */
static int resolve_key(struct gh_store *s, const char *v, char id[48])
{
	struct gh_cli_named named;
	struct gh_key k;
	struct gh_err e;

	if (gh_store_key_by_id(s, v, &k, &e) == GH_OK) {
		gh_strlcpy(id, k.id, 48);
		return 0;
	}
	if (e.code != GH_E_NOTFOUND || gh_cli_keys_named(s, v, &named, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		return -1;
	}
	if (named.n == 1) {
		gh_strlcpy(id, named.id, 48);
		return 0;
	}
	if (named.n == 0)
		fprintf(stderr, "gatehouse: --key: no key has the id or name \"%s\" (gatehouse keys "
			"list shows them)\n", v);
	else
		fprintf(stderr, "gatehouse: --key: %zu keys are named \"%s\": %s; give one's id\n",
			named.n, v, named.ids);
	return -1;
}

static void print_table_row(const struct gh_audit_row *r)
{
	const struct gh_audit_event *ev = r->ev;
	char ts[GH_ISO8601_MAX], what[512];

	gh_iso8601(ev->ts, ts, sizeof(ts));
	snprintf(what, sizeof(what), "%s%s%s", ev->reason ? ev->reason : "",
		 ev->reason && ev->error ? "; " : "", ev->error ? ev->error : "");
	printf("%-8lld %s %-18s %-22s %-8s %-8s %-28s %-12s %-28s %s\n", (long long)r->seq, ts,
	       ev->event ? ev->event : "-", ev->tool_name ? ev->tool_name : "-",
	       ev->source ? ev->source : "-", ev->outcome ? ev->outcome : "-",
	       ev->key_id ? ev->key_id : (ev->admin_user ? ev->admin_user : "-"),
	       ev->agent_id ? ev->agent_id : "-", ev->run_id ? ev->run_id : "-", what);
	if (ev->args && strcmp(ev->args, "null"))
		printf("         args %s\n", ev->args);
}

static void print_table_head(void)
{
	printf("%-8s %-24s %-18s %-22s %-8s %-8s %-28s %-12s %-28s %s\n", "SEQ", "TIME", "EVENT",
	       "TOOL", "SOURCE", "OUTCOME", "KEY", "AGENT", "RUN", "REASON/ERROR");
}

struct out_ctx {
	enum fmt fmt;
	struct gh_buf b;
	int64_t n;
	/* tail collects rows to print oldest first */
	cJSON *collect;
};

static int emit_row(void *ud, const struct gh_audit_row *r)
{
	struct out_ctx *o = ud;

	o->n++;
	if (o->collect) {
		cJSON_AddItemToArray(o->collect, gh_audit_row_json(r));
		return 0;
	}
	if (o->fmt == FMT_TABLE) {
		print_table_row(r);
	} else if (o->fmt == FMT_NDJSON) {
		cJSON *j = gh_audit_row_json(r);
		char *s = j ? cJSON_PrintUnformatted(j) : NULL;

		if (s)
			printf("%s\n", s);
		cJSON_free(s);
		cJSON_Delete(j);
	} else {
		gh_buf_reset(&o->b);
		if (gh_audit_row_csv(r, &o->b) == 0)
			fwrite(o->b.data, 1, o->b.len, stdout);
	}
	return ferror(stdout) ? 1 : 0;
}

/* An NDJSON export that stopped half way ends with an error line. */
static void export_failed(struct out_ctx *o, const struct gh_err *e)
{
	if (o->fmt != FMT_NDJSON)
		return;
	gh_buf_reset(&o->b);
	if (gh_audit_export_error_line(e->code, &o->b) == GH_BUF_OK)
		fwrite(o->b.data, 1, o->b.len, stdout);
	fflush(stdout);
}

/* Prints a collected JSON row as a table line. */
static void print_json_row(const cJSON *j)
{
	struct gh_audit_event ev;
	struct gh_audit_row r;
	cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "args");
	char *as = args && !cJSON_IsNull(args) ? gh_json_dump(args) : NULL;
	int64_t ms = 0;

	memset(&ev, 0, sizeof(ev));
	memset(&r, 0, sizeof(r));
	r.seq = gh_json_int(j, "seq", 0);
	gh_parse_time(gh_json_str(j, "ts"), &ms);
	ev.ts = ms;
	ev.event = gh_json_str(j, "event");
	ev.tool_name = gh_json_str(j, "toolName");
	ev.source = gh_json_str(j, "source");
	ev.outcome = gh_json_str(j, "outcome");
	ev.key_id = gh_json_str(j, "keyId");
	ev.admin_user = gh_json_str(j, "adminUser");
	ev.agent_id = gh_json_str(j, "agentId");
	ev.run_id = gh_json_str(j, "runId");
	ev.reason = gh_json_str(j, "reason");
	ev.error = gh_json_str(j, "error");
	ev.args = as;
	r.ev = &ev;
	print_table_row(&r);
	free(as);
}

/* tail, query and export (argv[2]). */
static int audit_read(int argc, char **argv)
{
	const char *what = argv[2];
	struct gh_cli c = {0};
	struct filter_opts fo = {0};
	const char *n_s = NULL, *limit_s = NULL, *before_s = NULL, *format = NULL;
	struct gh_opt opts[] = {
		{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
		{"-n", 1, &n_s, NULL},            {"--limit", 1, &limit_s, NULL},
		{"--before", 1, &before_s, NULL}, {"--format", 1, &format, NULL},
		{"--from", 1, &fo.from, NULL},    {"--to", 1, &fo.to, NULL},
		{"--key", 1, &fo.key, NULL},      {"--agent", 1, &fo.agent, NULL},
		{"--thread", 1, &fo.thread, NULL}, {"--run", 1, &fo.run, NULL},
		{"--tool", 1, &fo.tool, NULL},    {"--event", 1, &fo.event, NULL},
		{"--outcome", 1, &fo.outcome, NULL}, {0}};
	struct gh_audit_filter f;
	struct out_ctx o;
	struct gh_store *s = NULL;
	struct gh_err e;
	int64_t n = 20, limit = 50, before = 0, next = 0;
	char key_id[48];
	int help, rc;

	memset(&o, 0, sizeof(o));
	if (gh_cli_parse(argc, argv, 3, opts, usage_audit, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (parse_num("-n", n_s, 1, 100000, &n) != 0 ||
	    parse_num("--limit", limit_s, 1, 10000, &limit) != 0 ||
	    parse_num("--before", before_s, 1, INT64_MAX, &before) != 0 ||
	    parse_format(what, format, &o.fmt) != 0 || build_filter(&fo, &f) != 0) {
		fprintf(stderr, "(gatehouse audit --help lists the options)\n");
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (!(s = gh_cli_store(&c, 1, NULL)))
		goto out;
	if (fo.key) {
		if (resolve_key(s, fo.key, key_id) != 0) {
			rc = GH_EXIT_USAGE;
			goto out;
		}
		f.key_id = key_id;
	}
	gh_buf_init(&o.b, 1 << 26);
	if (o.fmt == FMT_CSV)
		fputs(gh_audit_csv_header, stdout);
	if (!strcmp(what, "tail")) {
		int i;

		o.collect = cJSON_CreateArray();
		if (gh_store_audit_query(s, &f, 0, (int)n, 0, emit_row, &o, NULL, &e) != GH_OK)
			goto fail;
		if (o.fmt == FMT_TABLE)
			print_table_head();
		for (i = cJSON_GetArraySize(o.collect) - 1; i >= 0; i--) {
			cJSON *j = cJSON_GetArrayItem(o.collect, i);

			if (o.fmt == FMT_TABLE) {
				print_json_row(j);
			} else {
				char *js = cJSON_PrintUnformatted(j);

				if (js)
					printf("%s\n", js);
				cJSON_free(js);
			}
		}
	} else if (!strcmp(what, "query")) {
		if (o.fmt == FMT_TABLE)
			print_table_head();
		if (gh_store_audit_query(s, &f, before, (int)limit, 0, emit_row, &o, &next, &e) !=
		    GH_OK)
			goto fail;
		if (o.fmt == FMT_TABLE)
			printf("%lld row%s%s", (long long)o.n, o.n == 1 ? "" : "s", next ? "" : "\n");
		if (o.fmt == FMT_TABLE && next)
			printf("; next page: --before %lld\n", (long long)next);
	} else {
		/* export: every matching row, oldest first, a page at a time so
		 * memory stays flat and no read transaction lasts long */
		int64_t cursor = 0;

		do {
			if (gh_store_audit_query(s, &f, cursor, 1000, 1, emit_row, &o, &next, &e) !=
			    GH_OK) {
				export_failed(&o, &e);
				goto fail;
			}
			cursor = next;
		} while (next);
	}
	rc = GH_EXIT_OK;
	goto out;
fail:
	fprintf(stderr, "gatehouse: %s\n", e.msg);
out:
	cJSON_Delete(o.collect);
	gh_buf_free(&o.b);
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

void gh_cli_audit_verify_print(const struct gh_audit_verify *rep, const char *witness_file,
			       int pg)
{
	if (rep->chain_ok) {
		char ts[GH_ISO8601_MAX] = "never";

		if (rep->signed_ts)
			gh_iso8601(rep->signed_ts, ts, sizeof(ts));
		printf("audit log intact: %lld rows verified (rows %lld..%lld) in %.2f s "
		       "(%.0f rows/s)\n",
		       (long long)rep->rows, (long long)(rep->anchor_seq ? rep->anchor_seq : 1),
		       (long long)rep->last_seq, rep->seconds,
		       rep->seconds > 0 ? (double)rep->rows / rep->seconds : 0.0);
		printf("last signed checkpoint: row %lld at %s; %lld newer rows not yet signed\n",
		       (long long)rep->signed_seq, ts, (long long)rep->unsigned_rows);
		if (rep->witness_read)
			printf("witness %s: %lld signed checkpoints seen (newest row %lld), every "
			       "one in the database%s\n", witness_file,
			       (long long)rep->witness_entries, (long long)rep->witness_seq,
			       rep->witness_pruned ? " or pruned with its rows" : "");
		else if (rep->witness_note[0])
			printf("witness: %s (nothing proves that no signed checkpoint was "
			       "removed)\n", rep->witness_note);
		if (rep->witness_invalid)
			printf("witness: %lld lines ignored (not well-formed or not validly "
			       "signed)\n", (long long)rep->witness_invalid);
	} else {
		printf("audit log NOT intact: first bad row %lld\n%s\n", (long long)rep->bad_seq,
		       rep->message);
		printf("(%lld rows before it verified)\n", (long long)rep->rows);
	}
	if (pg)
		printf("filter index: none to check (on PostgreSQL its own indexes serve "
		       "filtered queries)\n");
	else if (rep->index_ok && !rep->index_blocks)
		printf("filter index: nothing to check yet (it covers blocks of %d rows)\n",
		       GH_AUDIT_BLOCK_ROWS);
	else if (rep->index_ok)
		printf("filter index: intact (%lld blocks of %d rows checked against the rows)\n",
		       (long long)rep->index_blocks, GH_AUDIT_BLOCK_ROWS);
	else
		printf("filter index DAMAGED near row %lld: %s\nfiltered queries may miss rows; "
		       "`gatehouse audit reindex` rebuilds it from the rows\n",
		       (long long)rep->index_bad_seq, rep->index_message);
}

static int audit_verify(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *pub = NULL, *witness = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
				{"--pubkey", 1, &pub, NULL}, {"--witness", 1, &witness, NULL},
				{0}};
	struct gh_audit_signer signer;
	unsigned char pk[32], *trusted = NULL;
	struct gh_audit_verify_opts vo;
	struct gh_audit_verify rep;
	struct gh_store *s = NULL;
	struct gh_err e;
	int help, rc;

	if (gh_cli_parse(argc, argv, 3, opts, usage_audit, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (pub && (strlen(pub) != 64 || gh_unhex(pub, pk, 32) != 0)) {
		fprintf(stderr, "gatehouse: --pubkey: expected 64 hex characters\n");
		return GH_EXIT_USAGE;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (pub) {
		trusted = pk;
	} else if (gh_audit_signer_load(c.signing_key_file, 0, &signer, &e) == GH_OK) {
		memcpy(pk, signer.pk, 32);
		gh_audit_signer_wipe(&signer);
		trusted = pk;
	} else {
		fprintf(stderr, "gatehouse: warning: %s; checking signatures against the keys "
			"recorded in the database only (pin one with --pubkey)\n", e.msg);
	}
	if (!(s = gh_cli_store(&c, 1, NULL)))
		goto out;
	gh_audit_verify_opts_config(c.cfg, &vo);
	vo.trusted_pk = trusted;
	vo.witness_file = witness ? witness : c.witness_file;
	vo.witness_required = witness != NULL;
	if (gh_audit_verify_ex(s, &vo, &rep, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	gh_cli_audit_verify_print(&rep, vo.witness_file, gh_store_pg_pool(s) != NULL);
	rc = rep.ok ? GH_EXIT_OK : GH_EXIT_RUNTIME;
out:
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static void reindex_progress(void *ud, int64_t blocks)
{
	(void)ud;
	fprintf(stderr, "gatehouse: %lld blocks indexed\n", (long long)blocks);
}

static int audit_reindex(int argc, char **argv)
{
	struct gh_cli c = {0};
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL}, {0}};
	struct gh_store *s = NULL;
	struct gh_err e;
	int help, rc;
	int64_t t0 = gh_mono_ns();

	if (gh_cli_parse(argc, argv, 3, opts, usage_audit, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (!(s = gh_cli_store(&c, 0, NULL)))
		goto out;
	if (gh_store_audit_reindex(s, 1, reindex_progress, NULL, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	printf("filter index rebuilt in %.1f s\n", (double)(gh_mono_ns() - t0) / 1e9);
	rc = GH_EXIT_OK;
out:
	gh_store_close(s);
	gh_cli_free(&c);
	return rc;
}

static int audit_pubkey(int argc, char **argv)
{
	struct gh_cli c = {0};
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL}, {0}};
	struct gh_audit_signer signer;
	struct gh_err e;
	char hex[65];
	int help, rc;

	if (gh_cli_parse(argc, argv, 3, opts, usage_audit, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	/* created here when absent, as serve would */
	if (gh_audit_signer_load(c.signing_key_file, 1, &signer, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		gh_cli_free(&c);
		return GH_EXIT_RUNTIME;
	}
	gh_hex(signer.pk, 32, hex);
	gh_audit_signer_wipe(&signer);
	printf("%s\n", hex);
	gh_cli_free(&c);
	return GH_EXIT_OK;
}

int gh_cmd_audit(int argc, char **argv)
{
	static const struct gh_cli_sub subs[] = {
		{"tail", audit_read},     {"query", audit_read},      {"export", audit_read},
		{"verify", audit_verify}, {"reindex", audit_reindex}, {"pubkey", audit_pubkey},
		{NULL, NULL},
	};

	return gh_cli_dispatch(argc, argv, "audit", subs, usage_audit);
}
