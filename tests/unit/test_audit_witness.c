/*
 * test_audit_witness.c - the witness of signed checkpoints: its lines
 * (format, strict parse, signature check), reading a file (torn and
 * overlong lines, lines out of order, the cheap read of its end) and the
 * writer (lines appended whole, fsynced, counted; a path that cannot be
 * written is an error at open).
 */
#include "audit_witness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "audit.h"
#include "t.h"
#include "util.h"

/* A chained checkpoint at seq signed with s, chaining to prev. */
static void make_ckpt(const struct gh_audit_signer *s, int64_t seq, int64_t prev_seq,
		      const unsigned char prev_sig[64], struct gh_audit_checkpoint *c)
{
	memset(c, 0, sizeof(*c));
	c->seq = seq;
	c->ts = INT64_C(1795255200000) + seq;
	randombytes_buf(c->hash, 32);
	memcpy(c->public_key, s->pk, 32);
	c->ok_sizes = 1;
	c->chained = 1;
	c->prev_seq = prev_seq;
	gh_audit_sign_ckpt(s, seq, c->hash, c->ts, prev_seq, prev_sig, c->signature);
}

static void test_line_round_trip(void)
{
	struct gh_audit_signer s;
	struct gh_audit_checkpoint a, b, old;
	struct gh_witness_entry w;
	char line[GH_WITNESS_LINE_MAX];
	size_t n;

	crypto_sign_keypair(s.pk, s.sk);
	make_ckpt(&s, 1000, 0, NULL, &a);
	make_ckpt(&s, 2000, 1000, a.signature, &b);
	n = gh_witness_format(&b, a.signature, line, sizeof(line));
	T_ASSERT(n > 0 && line[n - 1] == '\n');
	T_ASSERT(!strncmp(line, "gatehouse-witness 1 seq=2000 ts=", 32));
	T_EQ_INT(gh_witness_parse(line, n, &w), 0);
	T_EQ_INT(w.c.seq, 2000);
	T_EQ_INT(w.c.ts, b.ts);
	T_EQ_INT(w.c.chained, 1);
	T_EQ_INT(w.c.prev_seq, 1000);
	T_ASSERT(!memcmp(w.c.hash, b.hash, 32));
	T_ASSERT(!memcmp(w.c.signature, b.signature, 64));
	T_ASSERT(!memcmp(w.prev_sig, a.signature, 64));
	/* the line alone proves the checkpoint was validly signed */
	T_EQ_INT(gh_witness_entry_valid(&w, NULL), 1);
	T_EQ_INT(gh_witness_entry_valid(&w, s.pk), 1);
	{
		unsigned char other[32];

		memcpy(other, s.pk, 32);
		other[3] ^= 1;
		T_EQ_INT(gh_witness_entry_valid(&w, other), 0);
	}
	w.prev_sig[0] ^= 1; /* it signs the checkpoint before it */
	T_EQ_INT(gh_witness_entry_valid(&w, NULL), 0);
	/* a checkpoint written before checkpoints chained */
	memset(&old, 0, sizeof(old));
	old.seq = 7;
	old.ts = 99;
	randombytes_buf(old.hash, 32);
	memcpy(old.public_key, s.pk, 32);
	old.ok_sizes = 1;
	gh_audit_sign(&s, "ckpt", old.seq, old.hash, old.ts, old.signature);
	n = gh_witness_format(&old, NULL, line, sizeof(line));
	T_ASSERT(strstr(line, " prev=- ") && strstr(line, " prevsig=-\n"));
	T_EQ_INT(gh_witness_parse(line, n - 1, &w), 0); /* without its newline too */
	T_EQ_INT(w.c.chained, 0);
	T_EQ_INT(gh_witness_entry_valid(&w, s.pk), 1);
	/* too small a buffer */
	T_EQ_INT(gh_witness_format(&b, a.signature, line, 100), 0);
	gh_audit_signer_wipe(&s);
}

static void test_parse_is_strict(void)
{
	struct gh_audit_signer s;
	struct gh_audit_checkpoint a;
	struct gh_witness_entry w;
	char line[GH_WITNESS_LINE_MAX], bad[GH_WITNESS_LINE_MAX + 16];
	size_t n;
	char *p;

	crypto_sign_keypair(s.pk, s.sk);
	make_ckpt(&s, 5, 0, NULL, &a);
	n = gh_witness_format(&a, NULL, line, sizeof(line));
	T_EQ_INT(gh_witness_parse(line, n, &w), 0);
	T_EQ_INT(gh_witness_parse("", 0, &w), -1);
	T_EQ_INT(gh_witness_parse("gatehouse-witness 2 seq=5", 25, &w), -1);
	/* cut anywhere: not a line */
	T_EQ_INT(gh_witness_parse(line, n / 2, &w), -1);
	/* a trailing field */
	snprintf(bad, sizeof(bad), "%.*s extra=1\n", (int)(n - 1), line);
	T_EQ_INT(gh_witness_parse(bad, strlen(bad), &w), -1);
	/* a bad hex digit in the signature */
	memcpy(bad, line, n + 1);
	p = strstr(bad, " sig=");
	p[8] = 'g';
	T_EQ_INT(gh_witness_parse(bad, n, &w), -1);
	/* seq not a number, prev not below seq */
	memcpy(bad, line, n + 1);
	p = strstr(bad, "seq=5");
	p[4] = 'x';
	T_EQ_INT(gh_witness_parse(bad, n, &w), -1);
	memcpy(bad, line, n + 1);
	p = strstr(bad, "prev=0");
	p[5] = '9';
	T_EQ_INT(gh_witness_parse(bad, n, &w), -1);
	/* one spelling only: no leading zeros, no sign, lower-case hex */
	p = strstr(line, "seq=5");
	snprintf(bad, sizeof(bad), "%.*s0%s", (int)(p - line) + 4, line, p + 4);
	T_CONTAINS(bad, "seq=05 ");
	T_EQ_INT(gh_witness_parse(bad, strlen(bad), &w), -1);
	memcpy(bad, line, n + 1);
	p = strstr(bad, "seq=5");
	p[4] = '+';
	T_EQ_INT(gh_witness_parse(bad, n, &w), -1);
	memcpy(bad, line, n + 1);
	p = strstr(bad, " key=");
	for (size_t i = 5; i < 69; i++)
		if (p[i] >= 'a' && p[i] <= 'f')
			p[i] = (char)(p[i] - 'a' + 'A');
	T_EQ_INT(gh_witness_parse(bad, n, &w), strcmp(bad, line) ? -1 : 0);
	/* fields in another order */
	T_EQ_INT(gh_witness_parse("gatehouse-witness 1 ts=1 seq=5 prev=- hash=00 key=00 sig=00 "
				  "prevsig=-", 62, &w), -1);
	gh_audit_signer_wipe(&s);
}

struct collect {
	int64_t seqs[64];
	int n;
};

static int collect_cb(void *ud, const struct gh_witness_entry *w)
{
	struct collect *c = ud;

	if (c->n < 64)
		c->seqs[c->n++] = w->c.seq;
	return 0;
}

static int write_file(const char *path, const char *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t w;

	if (fd < 0)
		return -1;
	w = write(fd, data, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

static void test_read_file(void)
{
	char dir[] = "/tmp/gh_test_witness_XXXXXX", path[128], line[GH_WITNESS_LINE_MAX];
	struct gh_audit_signer s;
	struct gh_audit_checkpoint a, b, c;
	struct gh_witness_entry w;
	struct collect got = {{0}, 0};
	struct gh_err e;
	char *buf = NULL;
	size_t len = 0, n;
	int64_t bad = -1;
	int found = 0;

	T_ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/w", dir);
	crypto_sign_keypair(s.pk, s.sk);
	make_ckpt(&s, 10, 0, NULL, &a);
	make_ckpt(&s, 20, 10, a.signature, &b);
	make_ckpt(&s, 30, 20, b.signature, &c);
	T_EQ_INT(gh_witness_read(path, collect_cb, &got, &bad, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_witness_newest(path, &w, &found, &e), GH_E_NOTFOUND);
	/* out of order (a server and a CLI share the file), with a line of
	 * junk, an overlong line and a torn last line */
	buf = malloc(8192);
	T_ASSERT(buf);
	n = gh_witness_format(&a, NULL, line, sizeof(line));
	memcpy(buf + len, line, n), len += n;
	n = gh_witness_format(&c, b.signature, line, sizeof(line));
	memcpy(buf + len, line, n), len += n;
	memcpy(buf + len, "junk\n", 5), len += 5;
	memset(buf + len, 'x', 2000), len += 2000;
	buf[len++] = '\n';
	n = gh_witness_format(&b, a.signature, line, sizeof(line));
	memcpy(buf + len, line, n), len += n;
	memcpy(buf + len, line, n / 2), len += n / 2;
	T_EQ_INT(write_file(path, buf, len), 0);
	T_EQ_INT(gh_witness_read(path, collect_cb, &got, &bad, &e), GH_OK);
	T_EQ_INT(got.n, 3);
	T_EQ_INT(got.seqs[0], 10);
	T_EQ_INT(got.seqs[1], 30);
	T_EQ_INT(got.seqs[2], 20);
	T_EQ_INT(bad, 3);
	/* the newest is the highest seq, wherever it stands */
	T_EQ_INT(gh_witness_newest(path, &w, &found, &e), GH_OK);
	T_EQ_INT(found, 1);
	T_EQ_INT(w.c.seq, 30);
	/* the cheap read looks at the end only: a file past 64 KiB */
	free(buf);
	buf = malloc(200000);
	T_ASSERT(buf);
	len = 0;
	for (int i = 0; len < 150000; i++) {
		struct gh_audit_checkpoint k = a;

		k.seq = 100 + i;
		n = gh_witness_format(&k, NULL, line, sizeof(line));
		memcpy(buf + len, line, n);
		len += n;
	}
	T_EQ_INT(write_file(path, buf, len), 0);
	T_EQ_INT(gh_witness_newest(path, &w, &found, &e), GH_OK);
	T_EQ_INT(found, 1);
	T_ASSERT(w.c.seq > 300);
	/* an empty file has no entry */
	T_EQ_INT(write_file(path, "", 0), 0);
	T_EQ_INT(gh_witness_newest(path, &w, &found, &e), GH_OK);
	T_EQ_INT(found, 0);
	free(buf);
	unlink(path);
	rmdir(dir);
	gh_audit_signer_wipe(&s);
}

static void test_writer(void)
{
	char dir[] = "/tmp/gh_test_witness_XXXXXX", path[128], nodir[160];
	struct gh_audit_signer s;
	struct gh_audit_checkpoint a, b;
	struct gh_witness_opts o;
	struct gh_witness *w = NULL;
	struct gh_witness_stats st;
	struct collect got = {{0}, 0};
	struct gh_err e;
	struct stat sb;
	int64_t bad = -1;

	T_ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/witness", dir);
	snprintf(nodir, sizeof(nodir), "%s/missing/witness", dir);
	crypto_sign_keypair(s.pk, s.sk);
	make_ckpt(&s, 4, 0, NULL, &a);
	make_ckpt(&s, 8, 4, a.signature, &b);
	memset(&o, 0, sizeof(o));
	o.path = nodir;
	T_EQ_INT(gh_witness_open(&o, &w, &e), GH_E_IO);
	T_CONTAINS(e.msg, "cannot open for appending");
	T_ASSERT(w == NULL);
	o.path = path;
	T_EQ_INT(gh_witness_open(&o, &w, &e), GH_OK);
	T_EQ_INT(stat(path, &sb), 0);
	T_EQ_INT(sb.st_mode & 0777, 0600);
	gh_witness_record(w, &a, NULL);
	gh_witness_on_checkpoint(w, &b, a.signature);
	gh_witness_close(w); /* writes what is queued */
	T_EQ_INT(gh_witness_read(path, collect_cb, &got, &bad, &e), GH_OK);
	T_EQ_INT(got.n, 2);
	T_EQ_INT(got.seqs[0], 4);
	T_EQ_INT(got.seqs[1], 8);
	T_EQ_INT(bad, 0);
	/* reopening appends */
	T_EQ_INT(gh_witness_open(&o, &w, &e), GH_OK);
	gh_witness_record(w, &b, a.signature);
	gh_witness_close(w);
	w = NULL;
	got.n = 0;
	T_EQ_INT(gh_witness_read(path, collect_cb, &got, &bad, &e), GH_OK);
	T_EQ_INT(got.n, 3);
	/* stats while open */
	T_EQ_INT(gh_witness_open(&o, &w, &e), GH_OK);
	gh_witness_record(w, &b, a.signature);
	for (int i = 0; i < 200; i++) {
		gh_witness_stats(w, &st);
		if (st.written == 1)
			break;
		usleep(10000);
	}
	T_EQ_INT(st.written, 1);
	T_EQ_INT(st.last_seq, 8);
	T_EQ_INT(st.failing, 0);
	gh_witness_close(w);
	unlink(path);
	rmdir(dir);
	gh_audit_signer_wipe(&s);
}

T_MAIN(T(test_line_round_trip), T(test_parse_is_strict), T(test_read_file), T(test_writer))
