/*
 * config.h - the one config file, parsed and validated at start.
 *
 * A JSON file (// and block comments allowed). Every string may contain
 * ${ENV_VAR} (a missing variable is an error) or ${ENV_VAR:-default}.
 * Every option is checked against its type and bounds; an error names the
 * file, the JSON path and what was expected, and nothing starts.
 *
 * A loaded config is immutable and shared read-only by every thread for
 * the life of the process. Secrets it holds (provider api_key, tool header
 * values) are wiped on free and never logged.
 */
#ifndef GH_CONFIG_H
#define GH_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"

struct gh_strlist {
	char **v;
	size_t n;
};

struct gh_server_conf {
	char *listen;                /* "127.0.0.1:8080" */
	int64_t max_body_bytes;      /* 413 beyond */
	int64_t threads;             /* CivetWeb workers (one per connection) */
	int64_t max_streams;         /* concurrent SSE streams; 503 beyond */
	int64_t heartbeat_ms;        /* SSE comment interval on idle streams */
	int64_t request_timeout_ms;  /* idle read timeout of a connection */
	int64_t head_timeout_ms;     /* a request head must arrive within this (front.h) */
	int64_t max_connections_per_address; /* open connections of one client; 0 = no cap */
	int64_t approval_wait_ms;    /* how long approve-tool-call / OpenAI / MCP wait */
	int64_t mcp_sessions_per_key; /* MCP sessions one key holds at /mcp */
	int64_t mcp_session_idle_ms; /* an MCP session unused this long ends */
	int64_t upstream_idle_ms;    /* a pooled upstream connection unused this long is closed */
	char *public_url;            /* how clients reach gatehouse (A2A cards; an https://
				      * URL also marks admin cookies Secure behind a proxy) */
};

struct gh_database_conf {
	char *path;                  /* SQLite: the file. With url: only the prefix of
				      * local files (key files, pid), beside the config */
	char *url;                   /* PostgreSQL (postgres:// or postgresql://), or NULL;
				      * may hold a password: never log it (gh_pg_url_redact) */
	int64_t pool_size;           /* PostgreSQL: connections per process */
	int64_t statement_timeout_ms; /* PostgreSQL: per statement; 0: the server's */
	int64_t connect_timeout_ms;  /* PostgreSQL: per connection attempt */
	int synchronous_full;        /* 0 = NORMAL (default), 1 = FULL */
	int64_t readers;             /* read connection pool size */
	int64_t busy_timeout_ms;
	int64_t group_commit_max;    /* most jobs in one transaction */
};

enum gh_provider_type { GH_PROVIDER_OPENAI, GH_PROVIDER_ANTHROPIC, GH_PROVIDER_MOCK };

struct gh_provider_conf {
	char *name;
	enum gh_provider_type type;
	char *base_url;              /* no trailing slash */
	char *api_key;               /* secret; may be NULL/"" (local servers) */
	int64_t timeout_ms;          /* whole request */
	int64_t connect_timeout_ms;
	int64_t max_retries;         /* on connect errors, 429 and 5xx */
	int64_t retry_base_ms;       /* backoff base, doubled per attempt */
	int64_t max_response_bytes;  /* upstream body cap (502 beyond) */
	char *anthropic_version;     /* "2023-06-01" */
	const cJSON *mock;           /* the provider's JSON object (mock rules); borrowed from root */
};

struct gh_header_conf {
	char *name;
	char *value;                 /* may hold a secret from ${ENV} */
};

enum gh_tool_type { GH_TOOL_HTTP };

struct gh_tool_conf {
	char *name;
	enum gh_tool_type type;
	char *description;
	cJSON *input_schema;         /* owned */
	cJSON *output_schema;        /* owned: JSON Schema of its results, or NULL */
	cJSON *annotations;          /* owned; MCP-style hints or NULL */
	char *url;                   /* the only URL this tool ever calls */
	struct gh_header_conf *headers;
	size_t nheaders;
	int64_t timeout_ms;
	int64_t max_response_bytes;
	int require_approval;        /* this tool always needs a person's approval */
};

enum gh_mcp_transport { GH_MCP_STDIO, GH_MCP_HTTP };

/* An upstream MCP server whose tools gatehouse offers as its own (mcp.h).
 * Only the config names a command to start or a URL to call. */
struct gh_mcp_server_conf {
	char *name;
	enum gh_mcp_transport transport;
	char *prefix;                /* exposed tool names: prefix + the tool's name */
	/* stdio: a child process speaking newline-delimited JSON-RPC */
	char *command;               /* looked up in PATH when it has no '/' */
	struct gh_strlist args;
	struct gh_header_conf *env;  /* added to the child's small environment; values
				      * may hold secrets */
	size_t nenv;
	char *cwd;                   /* NULL: gatehouse's own */
	/* http: Streamable HTTP */
	char *url;
	struct gh_header_conf *headers; /* values may hold secrets */
	size_t nheaders;
	int64_t timeout_ms;          /* one tools/call */
	int64_t connect_timeout_ms;  /* starting or connecting, initialize, tools/list */
	int64_t max_concurrency;     /* calls in flight; more wait for a slot */
	int64_t max_message_bytes;   /* one message from the upstream */
	int64_t retry_base_ms;       /* reconnect backoff: doubled per failure ... */
	int64_t retry_max_ms;        /* ... up to this */
	int64_t shutdown_grace_ms;   /* stdio: wait after closing stdin, then after SIGTERM */
};

struct gh_agent_conf {
	char *id;
	char *name;
	char *description;
	char *provider;              /* name of a providers entry (checked) */
	const struct gh_provider_conf *prov;
	char *model;
	char *instructions;
	struct gh_strlist tools;     /* server tool names or globs: "memory_*", "get_weather" */
	int memory_enabled;
	int64_t last_messages;
	int64_t max_steps;
	struct gh_strlist require_approval;  /* tool globs that need approval for this agent */
	int has_temperature;
	double temperature;
	int64_t max_tokens;          /* 0 = provider default */
	struct gh_strlist models;    /* model-name globs it answers to on /v1/messages */
	int passthrough;             /* adds no instructions; model unset: the client's */
	int64_t client_tool_timeout_s; /* a client tool's result is awaited this long */
};

struct gh_tool_limit {
	char *glob;
	int64_t per_minute;
};

enum gh_approver { GH_APPROVER_ADMIN, GH_APPROVER_CALLER };

/* A policy rule on a tool's arguments (policy.c matches it). */
enum gh_arg_effect { GH_ARG_DENY, GH_ARG_APPROVAL };

struct gh_arg_rule {
	char *name;                  /* the rule's name, or NULL: "arguments[i]" */
	size_t index;
	char *tool;                  /* glob on the tool name */
	char *pointer;               /* RFC 6901 JSON pointer into the arguments */
	char *regex;                 /* one of regex (JavaScript syntax) ... */
	char *glob;                  /* ... or glob ('*' within a path segment, '**' across) */
	int negate;                  /* the rule applies when the value does NOT match */
	enum gh_arg_effect effect;
	void *re;                    /* the compiled regex (regex_t), owned */
	long cost;                   /* its size, for bounding a match */
};

struct gh_policy_conf {
	char *name;
	struct gh_strlist agents;            /* agent id globs */
	struct gh_strlist tools_allow;       /* server tool globs */
	struct gh_strlist tools_deny;
	int client_tools_enabled;            /* may the key declare client tools at all */
	struct gh_strlist client_allow;      /* client tool name globs */
	struct gh_strlist client_deny;
	struct gh_strlist approval_require;  /* tool globs needing approval */
	struct gh_strlist approval_exempt;   /* federated MCP tool globs whose annotations
					      * would ask for approval by default: this
					      * policy lets them run without */
	enum gh_approver approver;
	int64_t approval_ttl_s;
	int64_t requests_per_minute;         /* 0 = unlimited */
	int64_t burst;
	struct gh_tool_limit *tool_limits;   /* "*" and per-tool globs, first match wins
					      * after exact names */
	size_t ntool_limits;
	int64_t tokens_per_minute;           /* 0 = unlimited */
	struct gh_arg_rule *arg_rules;       /* "arguments": conditions on a call's arguments */
	size_t narg_rules;
	char version[17];                    /* hex prefix of BLAKE2b(canonical policy JSON) */
};

/* What serve does with a database that is behind its witness. */
enum gh_witness_behind { GH_WITNESS_REFUSE, GH_WITNESS_READ_ONLY };

struct gh_witness_conf {
	int enabled;                         /* default true */
	char *file;                          /* NULL: "<db>-witness" */
	char *webhook_url;                   /* NULL: none */
	int64_t webhook_timeout_ms;
	int syslog;
	enum gh_witness_behind when_behind;
};

struct gh_audit_conf {
	struct gh_strlist redact;            /* argument field names masked before hashing */
	int64_t checkpoint_rows;             /* sign a checkpoint every N rows ... */
	int64_t checkpoint_seconds;          /* ... or every T seconds */
	int64_t unsigned_grace_seconds;      /* tail rule: rows may stay unsigned this much
					      * longer than checkpoint_seconds */
	struct gh_witness_conf witness;
	int64_t retention_days;              /* 0 = keep forever */
	int64_t retention_seconds;           /* finer alternative; wins when set */
	char *signing_key_file;              /* Ed25519 secret key, created 0600 at first start */
	int64_t max_args_bytes;              /* larger args are stored truncated (hash of full) */
};

struct gh_admin_conf {
	int64_t session_idle_s;
	int64_t session_max_s;
	int64_t login_attempts_per_minute;   /* failed logins per address (any user) */
	int64_t login_failures_per_user_per_hour; /* failed logins per user, all addresses */
};

/* GET /metrics (metrics.h): on the main listener for admins, or, with
 * listen, only on its own listener without authentication. */
struct gh_metrics_conf {
	int enabled;                 /* default true */
	char *listen;                /* "127.0.0.1:9464"; NULL: the main listener, admins only */
	int allow_remote;            /* listen may be a non-loopback address */
};

/* OpenTelemetry trace export (otel.h); endpoint NULL: no `otel` section,
 * nothing traced. */
struct gh_otel_conf {
	char *endpoint;              /* OTLP/HTTP base URL: spans go to {endpoint}/v1/traces */
	struct gh_header_conf *headers; /* values may hold secrets */
	size_t nheaders;
	int capture_content;         /* tool arguments and results on spans (redacted) */
	double sample_ratio;         /* traces gatehouse starts; an incoming one decides itself */
	int64_t max_queue;           /* spans waiting for export; more are dropped */
	int64_t max_batch;           /* spans per export request */
	int64_t interval_ms;         /* a partial batch waits at most this */
	int64_t timeout_ms;          /* one export request */
	int64_t shutdown_timeout_ms; /* flushing at shutdown */
};

/* Approval notifications (notify.h): where each event goes. */
enum gh_notify_kind { GH_NOTIFY_WEBHOOK, GH_NOTIFY_SMTP };
enum gh_notify_format { GH_NOTIFY_FORMAT_JSON, GH_NOTIFY_FORMAT_SLACK };

#define GH_NOTIFY_EV_REQUESTED 1
#define GH_NOTIFY_EV_DECIDED 2
#define GH_NOTIFY_EV_EXPIRED 4

struct gh_notify_target_conf {
	char *name;
	enum gh_notify_kind kind;
	char *url;                   /* may itself be a secret (a Slack hook): never logged */
	int events;                  /* GH_NOTIFY_EV_* bits */
	int64_t timeout_ms;          /* one delivery attempt, connect included */
	/* webhook */
	enum gh_notify_format format;
	char *secret;                /* HMAC-SHA256 key; secret; NULL: unsigned (slack only) */
	/* smtp */
	char *username;              /* NULL: no authentication */
	char *password;              /* secret */
	char *from;
	struct gh_strlist to;
	int starttls;                /* smtp://: require STARTTLS (default true) */
};

struct gh_notify_conf {
	struct gh_notify_target_conf *targets;
	size_t ntargets;
	int64_t queue_max;           /* deliveries held in memory; more are dropped */
	int64_t max_attempts;        /* per delivery, the first included */
	int64_t retry_base_ms;       /* backoff: base * 2^(n-1), jittered, ... */
	int64_t retry_max_ms;        /* ... at most this */
	int64_t retention_days;      /* finished deliveries kept; 0 = forever */
	int64_t retention_seconds;   /* finer alternative; wins when set */
};

/* "log": how gatehouse writes its stderr log (applied at start and by
 * every reload; GH_LOG in the environment wins over level). */
struct gh_log_conf {
	int json;                    /* format "json"; default "text" */
	int level;                   /* enum gh_log_level (log.h); default info */
};

struct gh_config {
	char *file;
	cJSON *root;                 /* the parsed, substituted document */
	struct gh_server_conf server;
	struct gh_database_conf database;
	char *key_hash_file;         /* 32-byte key for API key hashing */
	struct gh_provider_conf *providers;
	size_t nproviders;
	struct gh_agent_conf *agents;
	size_t nagents;
	char *default_agent;         /* agent served at /.well-known/agent-card.json */
	struct gh_tool_conf *tools;
	size_t ntools;
	struct gh_policy_conf *policies;
	size_t npolicies;
	struct gh_mcp_server_conf *mcp_servers;
	size_t nmcp_servers;
	struct gh_audit_conf audit;
	struct gh_admin_conf admin;
	struct gh_metrics_conf metrics;
	struct gh_otel_conf otel;
	struct gh_notify_conf notifications;
	struct gh_log_conf log;
};

/* Reads, substitutes and validates path. On success *out is owned by the
 * caller (gh_config_free). On failure returns GH_E_BADREQ (or GH_E_IO) with
 * "FILE: $.agents.assistant.max_steps: expected an integer in 1..100" in e
 * and *out NULL. */
enum gh_code gh_config_load(const char *path, struct gh_config **out, struct gh_err *e);

/* Same from a string (tests); name is used in messages. */
enum gh_code gh_config_parse(const char *name, const char *text, size_t len,
			     struct gh_config **out, struct gh_err *e);

void gh_config_free(struct gh_config *c);

/* s with every ${NAME} replaced by that environment variable (${NAME:-x}:
 * x when it is unset or empty), as the config's strings are. *out is the
 * caller's to free (NULL on failure); GH_E_BADREQ naming a variable that
 * is not set or a reference that is not one. */
enum gh_code gh_config_subst_env(const char *s, char **out, struct gh_err *e);

/* Lookups; NULL when absent. Results are borrowed from c. */
const struct gh_agent_conf *gh_config_agent(const struct gh_config *c, const char *id);
const struct gh_provider_conf *gh_config_provider(const struct gh_config *c, const char *name);
const struct gh_tool_conf *gh_config_tool(const struct gh_config *c, const char *name);
const struct gh_policy_conf *gh_config_policy(const struct gh_config *c, const char *name);
const struct gh_mcp_server_conf *gh_config_mcp_server(const struct gh_config *c,
						      const char *name);

/* A listen address: "HOST:PORT" where HOST is an IPv4 address, an IPv6
 * address in brackets ("[::1]:8080") or a host name (letters, digits, '-'
 * and '.', beginning with a letter), and PORT a decimal number in 0..65535
 * (0 picks a free port). On success returns 0 and fills host (without
 * brackets; cap >= GH_LISTEN_HOST_MAX) and *port; *v6 is 1 for a
 * bracketed address. Otherwise returns -1 with why (a sentence without the
 * option's name) in why[why_cap]. Does no name resolution. */
#define GH_LISTEN_HOST_MAX 256
int gh_config_listen_parse(const char *s, char *host, size_t cap, int *port, int *v6,
			   char *why, size_t why_cap);

/* 1 when s matches any glob in l. */
int gh_strlist_match(const struct gh_strlist *l, const char *s);

#endif
