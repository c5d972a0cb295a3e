/*
 * util.h - small helpers with no state: clocks, ids, hex, bounded string
 * copies and checked number parsing (instead of atoi/strcpy/sprintf).
 * Safe from any thread.
 */
#ifndef GH_UTIL_H
#define GH_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define GH_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Keeps a function out of its callers: for a helper with big locals that a
 * long-lived caller (a stream's handler) must not carry on its stack for
 * the whole of its life. */
#define GH_NOINLINE __attribute__((noinline))

/* Wall clock in milliseconds since the Unix epoch. */
int64_t gh_now_ms(void);
/* Monotonic clock in nanoseconds (for durations and rate limits). */
int64_t gh_mono_ns(void);
/* *out = clock clk's time now plus ms (ms >= 0): a deadline for
 * pthread_cond_timedwait on a condition variable using that clock. */
void gh_deadline(clockid_t clk, int64_t ms, struct timespec *out);
/* Initialises cv to time its waits on CLOCK_MONOTONIC (deadlines from
 * gh_deadline(CLOCK_MONOTONIC, ...)), so a wall-clock step never stretches
 * or cuts a wait. */
void gh_cond_init_mono(pthread_cond_t *cv);

/* Writes prefix + 24 base32 chars + NUL into out (cap bytes): 10 for the
 * time in milliseconds, then 14 random ones (70 bits). The alphabet is in
 * ASCII order, so ids made later sort after earlier ones and the rows they
 * key are appended to an index rather than scattered through it. Ids look
 * like "run_01kaf3m9qz...". cap must be >= strlen(prefix) + 25; when it is
 * not, out gets "". gh_id_new_at takes the time (for tools that write
 * history). */
void gh_id_new(const char *prefix, char *out, size_t cap);
void gh_id_new_at(const char *prefix, int64_t ms, char *out, size_t cap);
/* The same from given random bytes (a generator of test data that must
 * make the same ids again). */
void gh_id_make(const char *prefix, int64_t ms, const unsigned char rnd[14], char *out,
		size_t cap);
#define GH_ID_MAX 48

/* Lower-case hex of n bytes into out (2n+1 bytes). */
void gh_hex(const unsigned char *p, size_t n, char *out);
/* The value of one hex digit, or -1. */
int gh_hex_digit(char c);
/* Parses 2n hex chars into n bytes; -1 on bad input. */
int gh_unhex(const char *hex, unsigned char *out, size_t n);

/* Copies at most cap-1 bytes and terminates; returns strlen(src). */
size_t gh_strlcpy(char *dst, const char *src, size_t cap);

/* FNV-1a of the NUL-terminated s: for hash tables keyed by names and ids
 * (not for anything an attacker must not predict). */
uint32_t gh_hash_str(const char *s);

/* Parses a whole decimal integer within [min, max]; -1 on junk/overflow. */
int gh_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* The first of this process's open descriptors (as /proc/self/fd lists
 * them) for which match(fd, ud) is nonzero, or -1. */
int gh_fd_find(int (*match)(int fd, void *ud), void *ud);

/* Grows this process's descriptor table to hold n descriptors (n - 1 the
 * highest), now: 0, or -1 with errno (n over the soft limit: EINVAL). A
 * table never shrinks, so it does not grow again below n. */
int gh_fd_table_grow(int n);

/* strdup that returns NULL for NULL. Caller frees. */
char *gh_strdup(const char *s);

/* 1 when s is one of the strings of list (NULL-terminated). */
int gh_str_in(const char *const *list, const char *s);

/* 1 when s is 1..max bytes, each an ASCII letter or digit or one of the
 * characters of punct. */
int gh_chars_ok(const char *s, size_t max, const char *punct);

/* 1 when s matches glob pattern p ('*' any run, '?' one char). */
int gh_glob_match(const char *p, const char *s);

/* ISO-8601 UTC with milliseconds ("2026-11-21T10:00:00.123Z") into out
 * (at least 25 bytes). */
void gh_iso8601(int64_t ms, char *out, size_t cap);
#define GH_ISO8601_MAX 32
/* Parses ISO-8601 UTC ("YYYY-MM-DDTHH:MM:SS[.mmm]Z") or a plain integer of
 * Unix milliseconds; -1 on junk. */
int gh_parse_time(const char *s, int64_t *ms_out);

#endif
