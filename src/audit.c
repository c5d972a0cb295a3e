/*
 * audit.c - hash chain encoding, checkpoint signatures and redaction for
 * the audit log; see audit.h. Pure functions, safe from any thread.
 */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "buf.h"
#include "json.h"
#include "util.h"

/* The encoding goes through a small buffer: a row is some fifty short
 * pieces, and one hash update per piece cost more than the hashing. The
 * bytes hashed are the same. */
struct hasher {
	crypto_generichash_state st;
	size_t n;
	unsigned char b[512];
};

static void put(struct hasher *h, const void *p, size_t n)
{
	if (h->n + n > sizeof(h->b)) {
		crypto_generichash_update(&h->st, h->b, h->n);
		h->n = 0;
		if (n > sizeof(h->b)) {
			crypto_generichash_update(&h->st, p, n);
			return;
		}
	}
	memcpy(h->b + h->n, p, n);
	h->n += n;
}

static void put_i64(struct hasher *h, int64_t v)
{
	unsigned char b[8];
	uint64_t u = (uint64_t)v;
	int i;

	for (i = 7; i >= 0; i--) {
		b[i] = (unsigned char)(u & 0xff);
		u >>= 8;
	}
	put(h, b, sizeof(b));
}

/* A string field: a presence byte, then length and bytes; NULL and ""
 * hash differently. */
static void put_str(struct hasher *h, const char *s)
{
	unsigned char tag = s ? 1 : 0;

	put(h, &tag, 1);
	if (s) {
		size_t n = strlen(s);

		put_i64(h, (int64_t)n);
		put(h, s, n);
	}
}

void gh_audit_row_hash(const unsigned char prev[GH_AUDIT_HASH_LEN], int64_t seq,
		       const struct gh_audit_event *ev, unsigned char out[GH_AUDIT_HASH_LEN])
{
	struct hasher h;
	static const unsigned char domain[] = "gatehouse-audit-v1";

	crypto_generichash_init(&h.st, NULL, 0, GH_AUDIT_HASH_LEN);
	h.n = 0;
	put(&h, domain, sizeof(domain));
	put(&h, prev, GH_AUDIT_HASH_LEN);
	put_i64(&h, seq);
	put_i64(&h, ev->ts);
	put_str(&h, ev->event);
	put_str(&h, ev->key_id);
	put_str(&h, ev->owner);
	put_str(&h, ev->admin_user);
	put_str(&h, ev->agent_id);
	put_str(&h, ev->thread_id);
	put_str(&h, ev->run_id);
	put_str(&h, ev->tool_call_id);
	put_str(&h, ev->tool_name);
	put_str(&h, ev->source);
	put_str(&h, ev->args);
	put_str(&h, ev->outcome);
	put_i64(&h, ev->duration_ms);
	put_str(&h, ev->error);
	put_str(&h, ev->reason);
	put_str(&h, ev->detail);
	crypto_generichash_update(&h.st, h.b, h.n);
	crypto_generichash_final(&h.st, out, GH_AUDIT_HASH_LEN);
}

enum gh_code gh_audit_signer_load(const char *path, int create, struct gh_audit_signer *out,
				  struct gh_err *e)
{
	struct stat stt;
	int fd;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		unsigned char seed[32];

		crypto_sign_keypair(out->pk, out->sk);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return gh_err_set(e, GH_E_IO, "%s: cannot create the audit signing key: %s",
					  path, strerror(errno));
		crypto_sign_ed25519_sk_to_seed(seed, out->sk);
		n = write(fd, seed, sizeof(seed));
		sodium_memzero(seed, sizeof(seed));
		if (n != (ssize_t)sizeof(seed) || fsync(fd) != 0) {
			close(fd);
			unlink(path);
			return gh_err_set(e, GH_E_IO, "%s: cannot write the audit signing key",
					  path);
		}
		close(fd);
		return GH_OK;
	}
	if (fd < 0)
		return gh_err_set(e, GH_E_IO, "%s: cannot open the audit signing key: %s", path,
				  strerror(errno));
	if (fstat(fd, &stt) != 0 || (stt.st_mode & 077)) {
		close(fd);
		return gh_err_set(e, GH_E_IO,
				  "%s: the audit signing key must not be readable by group or "
				  "others (chmod 600)", path);
	}
	{
		unsigned char seed[33];

		n = read(fd, seed, sizeof(seed));
		close(fd);
		if (n != 32) {
			sodium_memzero(seed, sizeof(seed));
			return gh_err_set(e, GH_E_IO, "%s: not an audit signing key (want 32 bytes)",
					  path);
		}
		crypto_sign_seed_keypair(out->pk, out->sk, seed);
		sodium_memzero(seed, sizeof(seed));
	}
	return GH_OK;
}

void gh_audit_signer_wipe(struct gh_audit_signer *s)
{
	sodium_memzero(s->sk, sizeof(s->sk));
}

static void sig_message(const char *kind, int64_t seq, const unsigned char hash[32], int64_t ts,
			unsigned char msg[96], size_t *len)
{
	size_t k = strlen(kind), i;
	uint64_t u;

	/* "gatehouse-audit-<kind>" NUL seq(8) hash(32) ts(8) */
	memcpy(msg, "gatehouse-audit-", 16);
	memcpy(msg + 16, kind, k);
	i = 16 + k;
	msg[i++] = 0;
	u = (uint64_t)seq;
	for (int j = 7; j >= 0; j--, u >>= 8)
		msg[i + (size_t)j] = (unsigned char)(u & 0xff);
	i += 8;
	memcpy(msg + i, hash, 32);
	i += 32;
	u = (uint64_t)ts;
	for (int j = 7; j >= 0; j--, u >>= 8)
		msg[i + (size_t)j] = (unsigned char)(u & 0xff);
	i += 8;
	*len = i;
}

void gh_audit_sign(const struct gh_audit_signer *s, const char *kind, int64_t seq,
		   const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts, unsigned char sig[64])
{
	unsigned char msg[96];
	size_t len;

	sig_message(kind, seq, hash, ts, msg, &len);
	crypto_sign_detached(sig, NULL, msg, len, s->sk);
}

int gh_audit_sig_ok(const unsigned char pk[32], const char *kind, int64_t seq,
		    const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts,
		    const unsigned char sig[64])
{
	unsigned char msg[96];
	size_t len;

	sig_message(kind, seq, hash, ts, msg, &len);
	return crypto_sign_verify_detached(sig, msg, len, pk) == 0;
}

/* "gatehouse-audit-ckpt2" NUL seq(8) hash(32) ts(8) prev_seq(8) prev_sig(64) */
#define CKPT2_TAG "gatehouse-audit-ckpt2"
#define CKPT2_LEN (sizeof(CKPT2_TAG) + 8 + 32 + 8 + 8 + 64)

static void put_be64(unsigned char *p, int64_t v)
{
	uint64_t u = (uint64_t)v;

	for (int j = 7; j >= 0; j--, u >>= 8)
		p[j] = (unsigned char)(u & 0xff);
}

static void ckpt2_message(int64_t seq, const unsigned char hash[32], int64_t ts,
			  int64_t prev_seq, const unsigned char prev_sig[64],
			  unsigned char msg[CKPT2_LEN])
{
	static const unsigned char zero[64];
	size_t i = sizeof(CKPT2_TAG); /* the tag and its NUL */

	memcpy(msg, CKPT2_TAG, sizeof(CKPT2_TAG));
	put_be64(msg + i, seq);
	i += 8;
	memcpy(msg + i, hash, 32);
	i += 32;
	put_be64(msg + i, ts);
	i += 8;
	put_be64(msg + i, prev_seq);
	i += 8;
	memcpy(msg + i, prev_sig ? prev_sig : zero, 64);
}

void gh_audit_sign_ckpt(const struct gh_audit_signer *s, int64_t seq,
			const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts, int64_t prev_seq,
			const unsigned char prev_sig[64], unsigned char sig[64])
{
	unsigned char msg[CKPT2_LEN];

	ckpt2_message(seq, hash, ts, prev_seq, prev_sig, msg);
	crypto_sign_detached(sig, NULL, msg, sizeof(msg), s->sk);
}

int gh_audit_ckpt_sig_ok(const unsigned char pk[32], int64_t seq,
			 const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts, int64_t prev_seq,
			 const unsigned char prev_sig[64], const unsigned char sig[64])
{
	unsigned char msg[CKPT2_LEN];

	ckpt2_message(seq, hash, ts, prev_seq, prev_sig, msg);
	return crypto_sign_verify_detached(sig, msg, sizeof(msg), pk) == 0;
}

static int redacted_name(const char *name, const struct gh_strlist *names)
{
	size_t i;

	for (i = 0; name && i < names->n; i++)
		if (!strcasecmp(name, names->v[i]))
			return 1;
	return 0;
}

void gh_audit_redact(cJSON *args, const struct gh_strlist *names)
{
	cJSON *it;

	if (!args || !names || names->n == 0)
		return;
	for (it = args->child; it; it = it->next) {
		if (cJSON_IsObject(args) && redacted_name(it->string, names)) {
			cJSON *r = cJSON_CreateString("[REDACTED]");

			if (r) {
				/* swap in place, keeping the key, so iteration
				 * continues from the new item */
				r->string = strdup(it->string);
				if (!r->string) {
					cJSON_Delete(r);
					continue;
				}
				cJSON_ReplaceItemViaPointer(args, it, r);
				it = r;
			}
			continue;
		}
		if (cJSON_IsObject(it) || cJSON_IsArray(it))
			gh_audit_redact(it, names);
	}
}

char *gh_audit_args_json(const cJSON *args, const struct gh_strlist *redact, size_t max)
{
	cJSON *copy = NULL;
	struct gh_buf b;
	char *out = NULL;

	gh_buf_init(&b, 64u << 20);
	if (args) {
		copy = cJSON_Duplicate(args, 1);
		if (!copy)
			goto out;
		gh_audit_redact(copy, redact);
	}
	if (gh_json_canonical(copy, &b) != GH_BUF_OK)
		goto out;
	if (b.len > max) {
		unsigned char h[32];
		char hex[65];
		struct gh_buf t;

		crypto_generichash(h, sizeof(h), (const unsigned char *)b.data, b.len, NULL, 0);
		gh_hex(h, sizeof(h), hex);
		gh_buf_init(&t, 256);
		if (gh_buf_printf(&t, "{\"blake2b\":\"%s\",\"bytes\":%zu,\"truncated\":true}", hex,
				  b.len) == GH_BUF_OK)
			out = gh_buf_detach(&t);
		gh_buf_free(&t);
		goto out;
	}
	out = gh_buf_detach(&b);
out:
	gh_buf_free(&b);
	cJSON_Delete(copy);
	return out;
}

const char *const gh_audit_event_names[] = {
	/* tool decisions */
	"allowed", "denied", "rate_limited", "approval_requested", "approved", "expired",
	/* executions (interrupted: the end was never recorded), and model
	 * calls that failed */
	"executed", "failed", "interrupted", "client_result", "model_failed",
	/* admin actions */
	"key_created", "key_revoked", "policy_reload", "admin_created", "admin_disabled",
	"admin_enabled", "admin_password_changed", "admin_login", "admin_login_failed",
	"admin_logout", "config_reload",
	/* the log itself */
	"audit_check_failed",
	NULL,
};

const char *const gh_audit_outcome_names[] = {
	"ok", "error", "allowed", "denied", "rate_limited", "pending", "approved", "expired",
	"failed", "cancelled", "unknown", "no_effect", "broken", "refused", NULL,
};
