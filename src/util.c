/*
 * util.c - stateless helpers; see util.h.
 */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

int64_t gh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t gh_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void gh_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

void gh_deadline(clockid_t clk, int64_t ms, struct timespec *out)
{
	clock_gettime(clk, out);
	out->tv_sec += (time_t)(ms / 1000);
	out->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (out->tv_nsec >= 1000000000L) {
		out->tv_sec++;
		out->tv_nsec -= 1000000000L;
	}
}

void gh_id_make(const char *prefix, int64_t ms, const unsigned char rnd[14], char *out,
		size_t cap)
{
	static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
	uint64_t t = ms > 0 ? (uint64_t)ms : 0;
	size_t plen = strlen(prefix), i;

	if (cap < plen + 25) {
		if (cap)
			out[0] = '\0';
		return;
	}
	memcpy(out, prefix, plen);
	for (i = 0; i < 10; i++)
		out[plen + 9 - i] = alphabet[(t >> (5 * i)) & 31];
	for (i = 0; i < 14; i++)
		out[plen + 10 + i] = alphabet[rnd[i] & 31];
	out[plen + 24] = '\0';
}

/* The random part of ids: unpredictable, but not a system call each (a
 * request makes several). Each thread draws from a ChaCha20 keystream of
 * its own, keyed once from the system's generator; every block of it is
 * handed out once and wiped as it goes. */
#define ID_STREAM_BYTES 512

struct id_stream {
	unsigned char key[crypto_stream_chacha20_KEYBYTES];
	uint64_t block;                 /* the nonce of the next refill */
	unsigned char buf[ID_STREAM_BYTES];
	size_t left;
	int keyed;
};

static void id_random(unsigned char *out, size_t n)
{
	static _Thread_local struct id_stream st;
	unsigned char nonce[crypto_stream_chacha20_NONCEBYTES];
	size_t at;

	if (!st.keyed) {
		randombytes_buf(st.key, sizeof(st.key));
		st.keyed = 1;
	}
	if (st.left < n) {
		memset(nonce, 0, sizeof(nonce));
		memcpy(nonce, &st.block, sizeof(st.block) < sizeof(nonce) ? sizeof(st.block)
									 : sizeof(nonce));
		st.block++;
		crypto_stream_chacha20(st.buf, sizeof(st.buf), nonce, st.key);
		st.left = sizeof(st.buf);
	}
	at = sizeof(st.buf) - st.left;
	memcpy(out, st.buf + at, n);
	sodium_memzero(st.buf + at, n);
	st.left -= n;
}

void gh_id_new_at(const char *prefix, int64_t ms, char *out, size_t cap)
{
	unsigned char rnd[14];

	id_random(rnd, sizeof(rnd));
	gh_id_make(prefix, ms, rnd, out, cap);
}

void gh_id_new(const char *prefix, char *out, size_t cap)
{
	gh_id_new_at(prefix, gh_now_ms(), out, cap);
}

void gh_hex(const unsigned char *p, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[p[i] >> 4];
		out[2 * i + 1] = hex[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int gh_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int gh_unhex(const char *hex, unsigned char *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int hi = gh_hex_digit(hex[2 * i]), lo;

		if (hi < 0)
			return -1;
		lo = gh_hex_digit(hex[2 * i + 1]);
		if (lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return hex[2 * n] == '\0' ? 0 : -1;
}

uint32_t gh_hash_str(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

size_t gh_strlcpy(char *dst, const char *src, size_t cap)
{
	size_t n = strlen(src);

	if (cap) {
		size_t c = n < cap - 1 ? n : cap - 1;

		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

int gh_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

char *gh_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int gh_str_in(const char *const *list, const char *s)
{
	size_t i;

	for (i = 0; list[i]; i++)
		if (!strcmp(list[i], s))
			return 1;
	return 0;
}

int gh_chars_ok(const char *s, size_t max, const char *punct)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr(punct, c)))
			return 0;
	}
	return 1;
}

int gh_glob_match(const char *p, const char *s)
{
	const char *star = NULL, *ss = s;

	/* Iterative matcher with single-star backtracking: linear in practice
	 * and never recursive, so a hostile pattern cannot blow the stack. */
	while (*s) {
		if (*p == '*') {
			star = p++;
			ss = s;
		} else if (*p == '?' || *p == *s) {
			p++;
			s++;
		} else if (star) {
			p = star + 1;
			s = ++ss;
		} else {
			return 0;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

void gh_iso8601(int64_t ms, char *out, size_t cap)
{
	/* floor division, so times before 1970 keep a positive millisecond part */
	int64_t secs = ms / 1000 - (ms % 1000 < 0);
	time_t t = (time_t)secs;
	struct tm tm;
	char tmp[24];

	gmtime_r(&t, &tm);
	strftime(tmp, sizeof(tmp), "%Y-%m-%dT%H:%M:%S", &tm);
	/* tmp is at most 19 chars; ".mmmZ" adds 5 */
	if (cap < 25) {
		if (cap)
			out[0] = '\0';
		return;
	}
	memcpy(out, tmp, 19);
	ms -= secs * 1000; /* 0..999 */
	out[19] = '.';
	out[20] = (char)('0' + ms / 100);
	out[21] = (char)('0' + (ms % 100) / 10);
	out[22] = (char)('0' + ms % 10);
	out[23] = 'Z';
	out[24] = '\0';
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *s, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int gh_parse_time(const char *s, int64_t *ms_out)
{
	int y, mo, d, h, mi, sec, ms = 0;
	const char *p;

	if (!s)
		return -1;
	if (gh_parse_i64(s, 0, INT64_MAX, ms_out) == 0)
		return 0;
	if (strlen(s) < 19 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
	    s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') ||
	    digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) ||
	    s[16] != ':' || digits(s + 17, 2, &sec))
		return -1;
	p = s + 19;
	if (*p == '.') {
		int scale = 100;

		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9') {
			ms += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	if (*p == 'Z')
		p++;
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 60)
		return -1;
	{
		static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
		int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

		if (d > mdays[mo - 1] + (mo == 2 && leap))
			return -1;
	}
	*ms_out = ((days_from_civil(y, (unsigned)mo, (unsigned)d) * 24 + h) * 60 + mi) * 60000 +
		  (int64_t)sec * 1000 + ms;
	return 0;
}

int gh_fd_table_grow(int n)
{
	int fd, far, err;

	/* a descriptor at the top makes the kernel size the table for it;
	 * the table stays that size once it is closed */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	far = fcntl(fd, F_DUPFD_CLOEXEC, n - 1);
	err = errno;
	if (far >= 0)
		close(far);
	close(fd);
	errno = err;
	return far >= 0 ? 0 : -1;
}

int gh_fd_find(int (*match)(int fd, void *ud), void *ud)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int found = -1;

	if (!d)
		return -1;
	while (found < 0 && (de = readdir(d))) {
		int64_t v;

		if (gh_parse_i64(de->d_name, 0, 1 << 30, &v) != 0 || (int)v == dirfd(d))
			continue;
		if (match((int)v, ud))
			found = (int)v;
	}
	closedir(d);
	return found;
}
