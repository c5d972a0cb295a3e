/*
 * test_audit.c - the audit row hash covers every field (changing any one,
 * or NULL against "", changes it; bytes cannot move between adjacent
 * fields unnoticed), checkpoint signatures verify and any tampering is
 * caught, the signing key file is created private and refused when not,
 * redaction works at any depth and case-insensitively while keeping every
 * member's name, and oversized arguments are stored in the truncated form
 * with the hash of the full (redacted) canonical JSON.
 */
#include "audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "json.h"
#include "t.h"
#include "util.h"

static const unsigned char prev0[GH_AUDIT_HASH_LEN] = {1, 2, 3};

static struct gh_audit_event base_event(void)
{
	struct gh_audit_event ev = {
		.ts = INT64_C(1795255200123),
		.event = "executed",
		.key_id = "key_abc",
		.owner = "alice",
		.admin_user = "root",
		.agent_id = "assistant",
		.thread_id = "thr_1",
		.run_id = "run_1",
		.tool_call_id = "call_1",
		.tool_name = "send_email",
		.source = "server",
		.args = "{\"to\":\"x\"}",
		.outcome = "ok",
		.duration_ms = 12,
		.error = "none",
		.reason = "policy \"default\": tools.allow \"send_*\"",
		.detail = "{\"status\":200}",
	};

	return ev;
}

static void hash_of(const unsigned char *prev, int64_t seq, const struct gh_audit_event *ev,
		    unsigned char out[GH_AUDIT_HASH_LEN])
{
	gh_audit_row_hash(prev, seq, ev, out);
}

/* Offsets of the string fields in the event. */
static const struct {
	const char *name;
	size_t off;
} str_fields[] = {
	{"event", offsetof(struct gh_audit_event, event)},
	{"key_id", offsetof(struct gh_audit_event, key_id)},
	{"owner", offsetof(struct gh_audit_event, owner)},
	{"admin_user", offsetof(struct gh_audit_event, admin_user)},
	{"agent_id", offsetof(struct gh_audit_event, agent_id)},
	{"thread_id", offsetof(struct gh_audit_event, thread_id)},
	{"run_id", offsetof(struct gh_audit_event, run_id)},
	{"tool_call_id", offsetof(struct gh_audit_event, tool_call_id)},
	{"tool_name", offsetof(struct gh_audit_event, tool_name)},
	{"source", offsetof(struct gh_audit_event, source)},
	{"args", offsetof(struct gh_audit_event, args)},
	{"outcome", offsetof(struct gh_audit_event, outcome)},
	{"error", offsetof(struct gh_audit_event, error)},
	{"reason", offsetof(struct gh_audit_event, reason)},
	{"detail", offsetof(struct gh_audit_event, detail)},
};

static const char **field(struct gh_audit_event *ev, size_t i)
{
	return (const char **)(void *)((char *)ev + str_fields[i].off);
}

static void test_hash_every_field(void)
{
	struct gh_audit_event ev = base_event(), m;
	unsigned char h0[32], h[32], h2[32], prev[32];
	size_t i;

	hash_of(prev0, 7, &ev, h0);
	hash_of(prev0, 7, &ev, h);
	T_ASSERT(!memcmp(h0, h, 32)); /* deterministic */

	/* the chain link and the position */
	memcpy(prev, prev0, 32);
	prev[31] ^= 1;
	hash_of(prev, 7, &ev, h);
	T_ASSERT(memcmp(h0, h, 32) != 0);
	hash_of(prev0, 8, &ev, h);
	T_ASSERT(memcmp(h0, h, 32) != 0);
	/* the numbers */
	m = ev;
	m.ts++;
	hash_of(prev0, 7, &m, h);
	T_ASSERT(memcmp(h0, h, 32) != 0);
	m = ev;
	m.duration_ms = 13;
	hash_of(prev0, 7, &m, h);
	T_ASSERT(memcmp(h0, h, 32) != 0);
	m = ev;
	m.duration_ms = -1;
	hash_of(prev0, 7, &m, h);
	T_ASSERT(memcmp(h0, h, 32) != 0);

	for (i = 0; i < GH_ARRAY_LEN(str_fields); i++) {
		char changed[256];

		/* one byte different */
		m = ev;
		gh_strlcpy(changed, *field(&m, i), sizeof(changed));
		changed[0] ^= 1;
		*field(&m, i) = changed;
		hash_of(prev0, 7, &m, h);
		if (!memcmp(h0, h, 32))
			T_FAIL("changing %s does not change the hash", str_fields[i].name);
		/* NULL and "" differ, and both differ from the value */
		m = ev;
		*field(&m, i) = NULL;
		hash_of(prev0, 7, &m, h);
		*field(&m, i) = "";
		hash_of(prev0, 7, &m, h2);
		if (!memcmp(h, h2, 32))
			T_FAIL("%s: NULL and \"\" hash alike", str_fields[i].name);
		if (!memcmp(h0, h, 32) || !memcmp(h0, h2, 32))
			T_FAIL("%s: clearing it does not change the hash", str_fields[i].name);
		/* a byte moved into the next field is noticed */
		if (i + 1 < GH_ARRAY_LEN(str_fields)) {
			struct gh_audit_event a = ev, b = ev;

			*field(&a, i) = "ab";
			*field(&a, i + 1) = "c";
			*field(&b, i) = "a";
			*field(&b, i + 1) = "bc";
			hash_of(prev0, 7, &a, h);
			hash_of(prev0, 7, &b, h2);
			if (!memcmp(h, h2, 32))
				T_FAIL("%s/%s: a byte moved between them goes unnoticed",
				       str_fields[i].name, str_fields[i + 1].name);
		}
	}
	/* every field NULL at once is still a valid, distinct row */
	memset(&m, 0, sizeof(m));
	m.ts = ev.ts;
	m.duration_ms = -1;
	hash_of(prev0, 7, &m, h);
	T_ASSERT(memcmp(h0, h, 32) != 0);
}

/* ---- signing ---- */

struct tmpdir {
	char path[64];
};

static int tmpdir_make(struct tmpdir *t)
{
	gh_strlcpy(t->path, "/tmp/gh_test_audit_XXXXXX", sizeof(t->path));
	return mkdtemp(t->path) ? 0 : -1;
}

static void test_signer_file(void)
{
	struct tmpdir d;
	struct gh_audit_signer s1, s2;
	struct gh_err e;
	struct stat st;
	char path[128], other[128];
	unsigned char junk[40] = {0};
	int fd;

	T_EQ_INT(tmpdir_make(&d), 0);
	snprintf(path, sizeof(path), "%s/audit.key", d.path);
	/* not there and not allowed to create */
	T_EQ_INT(gh_audit_signer_load(path, 0, &s1, &e), GH_E_IO);
	T_CONTAINS(e.msg, "cannot open the audit signing key");
	/* created private, reloads to the same key */
	T_EQ_INT(gh_audit_signer_load(path, 1, &s1, &e), GH_OK);
	T_EQ_INT(stat(path, &st), 0);
	T_EQ_INT(st.st_mode & 0777, 0600);
	T_EQ_INT(st.st_size, 32);
	T_EQ_INT(gh_audit_signer_load(path, 1, &s2, &e), GH_OK);
	T_ASSERT(!memcmp(s1.pk, s2.pk, 32));
	T_ASSERT(!memcmp(s1.sk, s2.sk, 64));
	gh_audit_signer_wipe(&s2);
	T_ASSERT(sodium_is_zero(s2.sk, sizeof(s2.sk)));
	/* readable by others: refused */
	T_EQ_INT(chmod(path, 0644), 0);
	T_EQ_INT(gh_audit_signer_load(path, 1, &s2, &e), GH_E_IO);
	T_CONTAINS(e.msg, "must not be readable by group or others");
	T_EQ_INT(chmod(path, 0600), 0);
	/* the wrong size: refused */
	snprintf(other, sizeof(other), "%s/bad.key", d.path);
	fd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
	T_ASSERT(fd >= 0);
	T_EQ_INT(write(fd, junk, 33), 33);
	close(fd);
	T_EQ_INT(gh_audit_signer_load(other, 1, &s2, &e), GH_E_IO);
	T_CONTAINS(e.msg, "not an audit signing key");
	unlink(other);
	fd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
	T_ASSERT(fd >= 0);
	T_EQ_INT(write(fd, junk, 31), 31);
	close(fd);
	T_EQ_INT(gh_audit_signer_load(other, 1, &s2, &e), GH_E_IO);
	unlink(other);
	unlink(path);
	rmdir(d.path);
	gh_audit_signer_wipe(&s1);
}

static void test_sign_verify(void)
{
	struct gh_audit_signer s, s2;
	unsigned char hash[32], sig[64], bad[64], h2[32], pk2[32];

	crypto_sign_keypair(s.pk, s.sk);
	crypto_sign_keypair(s2.pk, s2.sk);
	randombytes_buf(hash, sizeof(hash));
	gh_audit_sign(&s, "ckpt", 1000, hash, INT64_C(1795255200000), sig);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 1000, hash, INT64_C(1795255200000), sig), 1);
	/* every input is covered */
	T_EQ_INT(gh_audit_sig_ok(s.pk, "anchor", 1000, hash, INT64_C(1795255200000), sig), 0);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 999, hash, INT64_C(1795255200000), sig), 0);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 1000, hash, INT64_C(1795255200001), sig), 0);
	memcpy(h2, hash, 32);
	h2[17] ^= 0x10;
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 1000, h2, INT64_C(1795255200000), sig), 0);
	memcpy(bad, sig, 64);
	bad[63] ^= 1;
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 1000, hash, INT64_C(1795255200000), bad), 0);
	T_EQ_INT(gh_audit_sig_ok(s2.pk, "ckpt", 1000, hash, INT64_C(1795255200000), sig), 0);
	memcpy(pk2, s.pk, 32);
	pk2[0] ^= 1;
	T_EQ_INT(gh_audit_sig_ok(pk2, "ckpt", 1000, hash, INT64_C(1795255200000), sig), 0);
	/* a checkpoint signature is not an anchor signature, and vice versa */
	gh_audit_sign(&s, "anchor", 1000, hash, INT64_C(1795255200000), bad);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "anchor", 1000, hash, INT64_C(1795255200000), bad), 1);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 1000, hash, INT64_C(1795255200000), bad), 0);
	/* big and negative numbers are encoded whole (no truncation to 32 bits) */
	gh_audit_sign(&s, "ckpt", INT64_C(1) << 40, hash, -5, sig);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", INT64_C(1) << 40, hash, -5, sig), 1);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", 0, hash, -5, sig), 0);
	T_EQ_INT(gh_audit_sig_ok(s.pk, "ckpt", INT64_C(1) << 40, hash, -4, sig), 0);
	gh_audit_signer_wipe(&s);
	gh_audit_signer_wipe(&s2);
}

/* ---- redaction ---- */

static struct gh_strlist list(char **v, size_t n)
{
	struct gh_strlist l = {v, n};

	return l;
}

static char *canonical(const cJSON *v)
{
	struct gh_buf b;

	gh_buf_init(&b, 1 << 20);
	if (gh_json_canonical(v, &b) != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}

/* Member names in document order, comma separated, at any depth. */
static void names(const cJSON *v, struct gh_buf *out)
{
	const cJSON *c;

	for (c = v ? v->child : NULL; c; c = c->next) {
		if (c->string) {
			gh_buf_puts(out, c->string);
			gh_buf_putc(out, ',');
		}
		names(c, out);
	}
}

static void test_redact(void)
{
	static char *red[] = {"password", "api_key", "Authorization"};
	struct gh_strlist l = list(red, GH_ARRAY_LEN(red));
	cJSON *v = cJSON_Parse(
		"{\"user\":\"bob\",\"PASSWORD\":\"hunter2\",\"nested\":{\"Api_Key\":\"sk-1\","
		"\"keep\":1,\"deeper\":[{\"authorization\":\"Bearer x\",\"ok\":true},"
		"[{\"password\":{\"a\":\"b\"}}]]},\"list\":[\"password\",\"api_key\"],"
		"\"last\":\"z\",\"password\":null}");
	struct gh_buf after;
	char *c;

	T_ASSERT(v);
	gh_buf_init(&after, 4096);
	gh_audit_redact(v, &l);
	names(v, &after);
	/* no member lost or renamed, order kept (the replaced value of the
	 * nested "password" had a member "a": that one goes) */
	c = gh_buf_detach(&after);
	if (strcmp(c, "user,PASSWORD,nested,Api_Key,keep,deeper,authorization,ok,password,list,"
		      "last,password,")) {
		fprintf(stderr, "  member names after redaction: %s\n", c);
		free(c);
		T_FAIL("redaction lost or renamed members");
	}
	free(c);
	c = canonical(v);
	T_EQ_STR(c, "{\"PASSWORD\":\"[REDACTED]\",\"last\":\"z\","
		    "\"list\":[\"password\",\"api_key\"],"
		    "\"nested\":{\"Api_Key\":\"[REDACTED]\",\"deeper\":[{\"authorization\":"
		    "\"[REDACTED]\",\"ok\":true},[{\"password\":\"[REDACTED]\"}]],\"keep\":1},"
		    "\"password\":\"[REDACTED]\",\"user\":\"bob\"}");
	T_ASSERT(!strstr(c, "hunter2") && !strstr(c, "sk-1") && !strstr(c, "Bearer"));
	free(c);
	/* lookups by name still work after redaction */
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(v, "nested"), "Api_Key"), "[REDACTED]");
	T_EQ_STR(gh_json_str(v, "last"), "z");
	cJSON_Delete(v);

	/* the first and only members, and an array at the top */
	v = cJSON_Parse("[{\"password\":1},{\"x\":{\"password\":2}}]");
	gh_audit_redact(v, &l);
	c = canonical(v);
	T_EQ_STR(c, "[{\"password\":\"[REDACTED]\"},{\"x\":{\"password\":\"[REDACTED]\"}}]");
	free(c);
	cJSON_Delete(v);

	/* nothing configured, or nothing to redact: untouched */
	v = cJSON_Parse("{\"password\":\"p\"}");
	{
		struct gh_strlist none = {NULL, 0};

		gh_audit_redact(v, &none);
		gh_audit_redact(v, NULL);
		gh_audit_redact(NULL, &l);
	}
	T_EQ_STR(gh_json_str(v, "password"), "p");
	cJSON_Delete(v);
	/* names are whole-word, not substrings */
	v = cJSON_Parse("{\"password_hint\":\"h\",\"my_api_key_id\":\"i\"}");
	gh_audit_redact(v, &l);
	T_EQ_STR(gh_json_str(v, "password_hint"), "h");
	T_EQ_STR(gh_json_str(v, "my_api_key_id"), "i");
	cJSON_Delete(v);
}

static void test_args_json(void)
{
	static char *red[] = {"token"};
	struct gh_strlist l = list(red, 1);
	cJSON *v = cJSON_Parse("{\"b\":[1,2.5],\"a\":\"x\",\"token\":\"t0ps3cret\"}");
	char *s, *full, hex[65];
	unsigned char h[32];
	cJSON *t;

	s = gh_audit_args_json(v, &l, 1024);
	T_EQ_STR(s, "{\"a\":\"x\",\"b\":[1,2.5],\"token\":\"[REDACTED]\"}");
	full = s;
	/* the caller's value is not modified */
	T_EQ_STR(gh_json_str(v, "token"), "t0ps3cret");
	/* exactly max bytes fits */
	s = gh_audit_args_json(v, &l, strlen(full));
	T_EQ_STR(s, full);
	free(s);
	/* one byte less: the truncated form, hashing the full redacted text */
	s = gh_audit_args_json(v, &l, strlen(full) - 1);
	crypto_generichash(h, 32, (const unsigned char *)full, strlen(full), NULL, 0);
	gh_hex(h, 32, hex);
	t = cJSON_Parse(s);
	T_ASSERT(t != NULL);
	T_EQ_INT(gh_json_bool(t, "truncated", 0), 1);
	T_EQ_INT(gh_json_int(t, "bytes", -1), (int64_t)strlen(full));
	T_EQ_STR(gh_json_str(t, "blake2b"), hex);
	T_EQ_INT(cJSON_GetArraySize(t), 3);
	T_ASSERT(!strstr(s, "t0ps3cret"));
	{
		char *c = canonical(t);

		T_EQ_STR(s, c); /* stored canonical, like every args value */
		free(c);
	}
	cJSON_Delete(t);
	free(s);
	free(full);
	/* NULL args */
	s = gh_audit_args_json(NULL, &l, 256);
	T_EQ_STR(s, "null");
	free(s);
	cJSON_Delete(v);
}

T_MAIN(T(test_hash_every_field), T(test_signer_file), T(test_sign_verify), T(test_redact),
       T(test_args_json))
