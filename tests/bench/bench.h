/*
 * bench.h - helpers shared by gatehouse's benchmarks (tests/bench/bench_*.c):
 * clocks and percentiles, temp directories, starting gatehouse and the fake
 * upstream as child processes on loopback, a small blocking keep-alive HTTP
 * client, and reading a process's resident memory.
 *
 * Every benchmark is one executable built from one bench_<name>.c, so the
 * helpers live here as static functions (each benchmark uses a subset).
 * Nothing here is asserted as a test: benchmarks print tables.
 *
 * Threading: the process helpers are for the main thread during set-up and
 * tear-down; a struct bconn belongs to one thread at a time; the rest is
 * stateless and safe from any thread.
 */
#ifndef GH_BENCH_H
#define GH_BENCH_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_UNUSED __attribute__((unused))
#define BENCH_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Largest HTTP response header block and body the client accepts. */
#define BENCH_HDR_MAX (64u << 10)
#define BENCH_BODY_MAX (256u << 20)

/* ------------------------------------------------------------ clocks */

BENCH_UNUSED static int64_t bench_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

BENCH_UNUSED static void bench_sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Children started by bench_spawn, stopped on bench_die and on SIGINT or
 * SIGTERM so an interrupted benchmark leaves no server behind. */
#define BENCH_MAX_CHILDREN 16
static volatile pid_t bench_children[BENCH_MAX_CHILDREN];

/* Kills and reaps them (async-signal-safe: used by the signal handler). */
BENCH_UNUSED static void bench_kill_children(void)
{
	int i;

	for (i = 0; i < BENCH_MAX_CHILDREN; i++)
		if (bench_children[i] > 0)
			kill(bench_children[i], SIGKILL);
	for (i = 0; i < BENCH_MAX_CHILDREN; i++) {
		pid_t pid = bench_children[i];

		if (pid > 0) {
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			bench_children[i] = 0;
		}
	}
}

/* Called after the children are killed when the benchmark dies (0) or
 * gets a signal (1: only async-signal-safe calls then), to stop what is
 * not a child (a PostgreSQL server, bench_pg.h). */
static void (*volatile bench_cleanup)(int in_signal);

BENCH_UNUSED static void bench_on_signal(int sig)
{
	bench_kill_children();
	if (bench_cleanup)
		bench_cleanup(1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Call first in main: cleans up children on signals; ignores SIGPIPE. */
BENCH_UNUSED static void bench_init(void)
{
	signal(SIGINT, bench_on_signal);
	signal(SIGTERM, bench_on_signal);
	signal(SIGHUP, bench_on_signal);
	signal(SIGPIPE, SIG_IGN);
}

/* The temp dir of this run, named when the benchmark dies (kept for a look). */
static char bench_dir_made[PATH_MAX];

BENCH_UNUSED BENCH_PRINTF(1, 2) __attribute__((noreturn)) static void bench_die(const char *fmt, ...)
{
	va_list ap;

	bench_kill_children();
	if (bench_cleanup) {
		void (*fn)(int) = bench_cleanup;

		bench_cleanup = NULL; /* once, even when it dies itself */
		fn(0);
	}
	fflush(stdout);
	fputs("bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (bench_dir_made[0])
		fprintf(stderr, "bench: files left in %s\n", bench_dir_made);
	exit(2);
}

/* snprintf that dies instead of truncating (paths, request lines). */
BENCH_UNUSED BENCH_PRINTF(3, 4) static void bench_fmt(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap)
		bench_die("string too long: %.80s...", out);
}

/* ------------------------------------------------------- statistics */

struct bench_stats {
	size_t n;
	double p50, p90, p99, mean, max; /* in the unit of the samples given */
};

BENCH_UNUSED static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

BENCH_UNUSED static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
BENCH_UNUSED static int64_t bench_pct_sorted(const int64_t *v, size_t n, double p)
{
	size_t k;

	if (n == 0)
		return 0;
	k = (size_t)ceil(p / 100.0 * (double)n);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* Sorts v in place and summarises it; scale divides every figure (1e3 turns
 * ns into us). */
BENCH_UNUSED static struct bench_stats bench_summary(int64_t *v, size_t n, double scale)
{
	struct bench_stats s;
	double sum = 0;
	size_t i;

	memset(&s, 0, sizeof(s));
	if (n == 0)
		return s;
	qsort(v, n, sizeof(*v), cmp_i64);
	for (i = 0; i < n; i++)
		sum += (double)v[i];
	s.n = n;
	s.p50 = (double)bench_pct_sorted(v, n, 50) / scale;
	s.p90 = (double)bench_pct_sorted(v, n, 90) / scale;
	s.p99 = (double)bench_pct_sorted(v, n, 99) / scale;
	s.max = (double)v[n - 1] / scale;
	s.mean = sum / (double)n / scale;
	return s;
}

/* Median of n doubles (copied; v is left as it is). */
BENCH_UNUSED static double bench_median(const double *v, size_t n)
{
	double tmp[256];
	size_t m = n < 256 ? n : 256;

	if (m == 0)
		return 0;
	memcpy(tmp, v, m * sizeof(*tmp));
	qsort(tmp, m, sizeof(*tmp), cmp_dbl);
	return m % 2 ? tmp[m / 2] : (tmp[m / 2 - 1] + tmp[m / 2]) / 2;
}

BENCH_UNUSED static double bench_min(const double *v, size_t n)
{
	double m = n ? v[0] : 0;

	for (size_t i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

BENCH_UNUSED static double bench_maxd(const double *v, size_t n)
{
	double m = n ? v[0] : 0;

	for (size_t i = 1; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* ----------------------------------------------------------- options */

/* "--name value" parsing: returns the value when argv[*i] is name. */
BENCH_UNUSED static const char *bench_opt(int argc, char **argv, int *i, const char *name)
{
	if (strcmp(argv[*i], name) != 0)
		return NULL;
	if (*i + 1 >= argc)
		bench_die("%s needs a value", name);
	return argv[++*i];
}

BENCH_UNUSED static int64_t bench_num(const char *s, int64_t min, int64_t max, const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		bench_die("%s: expected an integer in %lld..%lld, got \"%s\"", what, (long long)min,
			  (long long)max, s);
	return (int64_t)v;
}

/* A comma-separated list of integers in min..max (e.g. --conc 1,16) into
 * out (room for cap); how many. An empty item, more than cap or a bad
 * number ends the benchmark with a message naming what. */
BENCH_UNUSED static int bench_nums(const char *s, int *out, int cap, int64_t min, int64_t max,
				   const char *what)
{
	int n = 0;

	while (*s) {
		char one[24];
		size_t k = strcspn(s, ",");

		if (n == cap || k == 0 || k >= sizeof(one))
			bench_die("%s: up to %d integers separated by commas, got \"%s\"", what, cap,
				  s);
		memcpy(one, s, k);
		one[k] = '\0';
		out[n++] = (int)bench_num(one, min, max, what);
		s += k + (s[k] == ',');
	}
	if (!n)
		bench_die("%s: expected at least one integer", what);
	return n;
}

/* The build tree holding this benchmark: benchmarks live in BUILD/tests/,
 * gatehouse in BUILD/ and the fake upstream in BUILD/tests/. GH_BIN and
 * GH_FAKE (as CTest sets them) win. */
BENCH_UNUSED static void bench_paths(char *gh, char *fake, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		bench_die("cannot read /proc/self/exe");
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	if (getenv("GH_BIN"))
		bench_fmt(gh, cap, "%s", getenv("GH_BIN"));
	else
		bench_fmt(gh, cap, "%s/../gatehouse", self);
	if (getenv("GH_FAKE"))
		bench_fmt(fake, cap, "%s", getenv("GH_FAKE"));
	else
		bench_fmt(fake, cap, "%s/fake_upstream", self);
	if (access(gh, X_OK) != 0)
		bench_die("gatehouse binary not found at %s (set GH_BIN)", gh);
	if (access(fake, X_OK) != 0)
		bench_die("fake_upstream not found at %s (set GH_FAKE)", fake);
}

/* ------------------------------------------------------ files, dirs */

BENCH_UNUSED static void bench_tmpdir(char *out, size_t cap, const char *name)
{
	const char *base = getenv("GH_BENCH_TMP");

	bench_fmt(out, cap, "%s/gh-bench-%s-XXXXXX", base && *base ? base : "/tmp", name);
	if (!mkdtemp(out))
		bench_die("mkdtemp %s: %s", out, strerror(errno));
	snprintf(bench_dir_made, sizeof(bench_dir_made), "%s", out);
}

/* Removes dir and everything under it (no symlinks are followed). */
BENCH_UNUSED static void bench_rmrf(const char *dir)
{
	DIR *d;
	struct dirent *de;
	char p[PATH_MAX];
	struct stat st;

	if (!dir || !*dir || !strcmp(dir, "/"))
		return;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		bench_fmt(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			bench_rmrf(p);
		else
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* memmem: the first n-byte needle in hay[0..len), or NULL. */
BENCH_UNUSED static char *bench_memfind(const char *hay, size_t len, const char *needle, size_t n)
{
	size_t i;

	if (n == 0 || len < n)
		return NULL;
	for (i = 0; i + n <= len; i++) {
		const char *p = memchr(hay + i, needle[0], len - n + 1 - i);

		if (!p)
			return NULL;
		i = (size_t)(p - hay);
		if (!memcmp(p, needle, n))
			return (char *)(uintptr_t)p;
	}
	return NULL;
}

BENCH_UNUSED static void bench_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		bench_die("cannot write %s", path);
}

/* Whole file into a NUL-terminated buffer (at most cap-1 bytes); returns
 * the length or -1. */
BENCH_UNUSED static ssize_t bench_read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* The number after field ("VmRSS:") in /proc/<pid>/status, or -1. */
BENCH_UNUSED static int64_t bench_status_num(pid_t pid, const char *field)
{
	char path[64], buf[8192], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (bench_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, field);
	return p ? strtoll(p + strlen(field), NULL, 10) : -1;
}

/* Resident set size of pid in KiB (VmRSS), or -1. */
BENCH_UNUSED static int64_t bench_rss_kb(pid_t pid)
{
	return bench_status_num(pid, "VmRSS:");
}

/* Threads of pid, or -1. */
BENCH_UNUSED static int64_t bench_threads(pid_t pid)
{
	return bench_status_num(pid, "Threads:");
}

/* CPU time (user + system, every thread, ended ones included) pid has
 * used, in ns, and in *sys (when not NULL) the system part; -1 when
 * unknown. The total comes from pid's CPU-time clock, to the nanosecond
 * (/proc/<pid>/stat counts in clock ticks, 10 ms: 20 us per request over
 * 500 requests); the system part exists only in ticks. */
BENCH_UNUSED static int64_t bench_cpu_split_ns(pid_t pid, int64_t *sys)
{
	char path[64], buf[4096], *p;
	unsigned long long ut = 0, stime = 0, tick;
	struct timespec ts;
	clockid_t clk;
	int64_t total = -1;
	int field;

	if (sys)
		*sys = -1;
	if (clock_getcpuclockid(pid, &clk) == 0 && clock_gettime(clk, &ts) == 0) {
		total = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		if (!sys)
			return total;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (bench_read_file(path, buf, sizeof(buf)) < 0 || !(p = strrchr(buf, ')')))
		return total;
	/* fields after the command: 3 state ... 14 utime 15 stime */
	for (field = 2; field < 14 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu %llu", &ut, &stime) != 2)
		return total;
	tick = 1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK);
	if (sys)
		*sys = (int64_t)(stime * tick);
	return total >= 0 ? total : (int64_t)((ut + stime) * tick);
}

BENCH_UNUSED static int64_t bench_cpu_ns(pid_t pid)
{
	return bench_cpu_split_ns(pid, NULL);
}

/* Context switches (voluntary + involuntary) summed over pid's threads. */
BENCH_UNUSED static int64_t bench_ctxsw(pid_t pid)
{
	char path[PATH_MAX], buf[8192];
	DIR *d;
	struct dirent *de;
	int64_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return -1;
	while ((de = readdir(d))) {
		const char *p;

		if (de->d_name[0] == '.')
			continue;
		bench_fmt(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, de->d_name);
		if (bench_read_file(path, buf, sizeof(buf)) < 0)
			continue;
		if ((p = strstr(buf, "voluntary_ctxt_switches:")))
			n += strtoll(p + 24, NULL, 10);
		if ((p = strstr(buf, "nonvoluntary_ctxt_switches:")))
			n += strtoll(p + 27, NULL, 10);
	}
	closedir(d);
	return n;
}

/* Raises the soft open-files limit to at least want (up to the hard
 * limit); returns the limit now in force. */
BENCH_UNUSED static int64_t bench_nofile(int64_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if ((int64_t)rl.rlim_cur < want) {
		rl.rlim_cur = (rlim_t)want;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
			rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return (int64_t)rl.rlim_cur;
}

/* ---------------------------------------------------------- processes */

/* Starts argv[0] with cwd dir, stdout/stderr into files (NULL: /dev/null)
 * and extra "NAME=value" environment entries (NULL-terminated, may be
 * NULL). Call before starting threads. */
BENCH_UNUSED static pid_t bench_spawn(char *const argv[], const char *dir, const char *out_path,
				      const char *err_path, const char *const env[])
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fl = O_WRONLY | O_CREAT | O_APPEND;
		int o = open(out_path ? out_path : "/dev/null", fl, 0644);
		int e = open(err_path ? err_path : "/dev/null", fl, 0644);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		if (dir && chdir(dir) != 0)
			_exit(127);
		for (; env && *env; env++)
			putenv((char *)(uintptr_t)*env);
		setpgid(0, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	for (int i = 0; i < BENCH_MAX_CHILDREN; i++) {
		if (bench_children[i] <= 0) {
			bench_children[i] = pid;
			break;
		}
	}
	return pid;
}

/* pid is no longer ours to clean up (it was waited for). */
BENCH_UNUSED static void bench_forget(pid_t pid)
{
	for (int i = 0; i < BENCH_MAX_CHILDREN; i++)
		if (bench_children[i] == pid)
			bench_children[i] = 0;
}

/* SIGTERM, then SIGKILL after timeout_ms; returns the exit status (-1 when
 * it had to be killed). */
BENCH_UNUSED static int bench_stop(pid_t pid, int timeout_ms)
{
	int st = 0;
	int64_t end = bench_ns() + (int64_t)timeout_ms * 1000000;

	if (pid <= 0)
		return 0;
	bench_forget(pid);
	kill(pid, SIGTERM);
	while (bench_ns() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -1;
		bench_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* Runs argv to completion (bounded by timeout_ms) with stdout into out_path;
 * returns its exit status, -1 when killed. */
BENCH_UNUSED static int bench_run(char *const argv[], const char *dir, const char *out_path,
				  const char *err_path, const char *const env[], int timeout_ms)
{
	pid_t pid = bench_spawn(argv, dir, out_path, err_path, env);
	int64_t end = bench_ns() + (int64_t)timeout_ms * 1000000;
	int st = 0;

	while (bench_ns() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid) {
			bench_forget(pid);
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		bench_sleep_ms(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	bench_forget(pid);
	return -1;
}

/* Waits (bounded) until path holds a port: a number and a newline (the
 * fake's --port-file), or with listen_line a line "...listening on
 * http://HOST:PORT" (gatehouse's stdout). Returns the port; dies when pid
 * exits first. */
BENCH_UNUSED static int bench_wait_port(const char *path, pid_t pid, int listen_line,
					int timeout_ms)
{
	int64_t end = bench_ns() + (int64_t)timeout_ms * 1000000;
	char buf[4096];

	while (bench_ns() < end) {
		int st;

		if (bench_read_file(path, buf, sizeof(buf)) > 0) {
			const char *p = strstr(buf, "listening on http://");

			if (listen_line && p && (p = strchr(p + 20, ':')) && strchr(p, '\n'))
				return (int)strtol(p + 1, NULL, 10);
			if (!listen_line && strchr(buf, '\n'))
				return (int)strtol(buf, NULL, 10);
		}
		if (waitpid(pid, &st, WNOHANG) == pid)
			bench_die("%s: the process exited before it listened", path);
		bench_sleep_ms(10);
	}
	bench_die("%s: no port after %d ms", path, timeout_ms);
	return -1;
}

/* ------------------------------------------------------- HTTP client */

/* One keep-alive connection to 127.0.0.1:port. */
struct bconn {
	int fd;
	int port;
	int timeout_ms;
	char *in;        /* read buffer: bytes [off, len) not consumed yet */
	size_t off, len, cap;
	size_t rx;       /* bytes received since the current request was sent */
};

struct bresp {
	int status;
	char *body;      /* NUL-terminated; owned by the response (bresp_free) */
	size_t len, cap;
	int close;       /* the server ends the connection after this response */
};

BENCH_UNUSED static void bresp_free(struct bresp *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

BENCH_UNUSED static int bconn_connect(struct bconn *c)
{
	struct sockaddr_in a;
	int one = 1;
	struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)c->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	c->off = c->len = 0;
	return 0;
}

BENCH_UNUSED static void bconn_close(struct bconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->in);
	c->in = NULL;
	c->off = c->len = c->cap = 0;
}

BENCH_UNUSED static int bconn_open(struct bconn *c, int port, int timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->port = port;
	c->timeout_ms = timeout_ms;
	c->cap = 1 << 16;
	c->in = malloc(c->cap);
	if (!c->in)
		return -1;
	return bconn_connect(c);
}

/* Makes room and reads more; 0 on data, -1 on EOF/error/timeout. */
BENCH_UNUSED static int bconn_fill(struct bconn *c)
{
	ssize_t n;

	if (c->off > 0 && c->off == c->len)
		c->off = c->len = 0;
	if (c->len == c->cap) {
		if (c->off > 0) {
			memmove(c->in, c->in + c->off, c->len - c->off);
			c->len -= c->off;
			c->off = 0;
		} else {
			char *p;

			if (c->cap >= BENCH_BODY_MAX + BENCH_HDR_MAX)
				return -1;
			p = realloc(c->in, c->cap * 2);
			if (!p)
				return -1;
			c->in = p;
			c->cap *= 2;
		}
	}
	do
		n = read(c->fd, c->in + c->len, c->cap - c->len);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	c->len += (size_t)n;
	c->rx += (size_t)n;
	return 0;
}

/* A line ending in CRLF starting at c->off (waits for it); returns its
 * length without CRLF and advances past it; -1 on failure. */
BENCH_UNUSED static ssize_t bconn_line(struct bconn *c, const char **line)
{
	for (;;) {
		char *s = c->in + c->off;
		char *e = bench_memfind(s, c->len - c->off, "\r\n", 2);

		if (e) {
			*line = s;
			c->off += (size_t)(e - s) + 2;
			return e - s;
		}
		if (c->len - c->off > BENCH_HDR_MAX || bconn_fill(c) != 0)
			return -1;
	}
}

BENCH_UNUSED static int body_append(struct bresp *r, const char *p, size_t n)
{
	if (r->len + n + 1 > r->cap) {
		size_t nc = r->cap ? r->cap : 4096;
		char *q;

		while (nc < r->len + n + 1)
			nc *= 2;
		if (nc > BENCH_BODY_MAX)
			return -1;
		q = realloc(r->body, nc);
		if (!q)
			return -1;
		r->body = q;
		r->cap = nc;
	}
	memcpy(r->body + r->len, p, n);
	r->len += n;
	r->body[r->len] = '\0';
	return 0;
}

/* Consumes exactly n body bytes into r. */
BENCH_UNUSED static int bconn_take(struct bconn *c, struct bresp *r, size_t n)
{
	while (n > 0) {
		size_t have = c->len - c->off, k;

		if (have == 0) {
			if (bconn_fill(c) != 0)
				return -1;
			continue;
		}
		k = have < n ? have : n;
		if (body_append(r, c->in + c->off, k) != 0)
			return -1;
		c->off += k;
		n -= k;
	}
	return 0;
}

/* Reads one response (status line, headers, body by Content-Length or
 * chunked, or to EOF when neither). */
BENCH_UNUSED static int bconn_read_response(struct bconn *c, struct bresp *r)
{
	const char *line;
	ssize_t n;
	long long clen = -1;
	int chunked = 0;

	n = bconn_line(c, &line);
	if (n < 12 || strncmp(line, "HTTP/1.", 7) != 0)
		return -1;
	r->status = (int)strtol(line + 9, NULL, 10);
	for (;;) {
		n = bconn_line(c, &line);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		if (n > 15 && !strncasecmp(line, "Content-Length:", 15))
			clen = strtoll(line + 15, NULL, 10);
		else if (n > 18 && !strncasecmp(line, "Transfer-Encoding:", 18) &&
			 bench_memfind(line, (size_t)n, "chunked", 7))
			chunked = 1;
		else if (n > 11 && !strncasecmp(line, "Connection:", 11) &&
			 bench_memfind(line, (size_t)n, "close", 5))
			r->close = 1;
	}
	if (body_append(r, "", 0) != 0)
		return -1;
	if (chunked) {
		for (;;) {
			long long sz;

			n = bconn_line(c, &line);
			if (n <= 0)
				return -1;
			sz = strtoll(line, NULL, 16);
			if (sz < 0 || sz > (long long)BENCH_BODY_MAX)
				return -1;
			if (sz == 0) {
				/* trailers, then the empty line */
				while ((n = bconn_line(c, &line)) > 0)
					;
				return n == 0 ? 0 : -1;
			}
			if (bconn_take(c, r, (size_t)sz) != 0 || bconn_line(c, &line) != 0)
				return -1;
		}
	}
	if (clen >= 0)
		return bconn_take(c, r, (size_t)clen);
	r->close = 1;
	while (bconn_fill(c) == 0) {
		if (body_append(r, c->in + c->off, c->len - c->off) != 0)
			return -1;
		c->off = c->len;
	}
	return 0;
}

BENCH_UNUSED static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Sends one request and reads the whole response into r (fresh; free it
 * with bresp_free). extra_headers: "Name: v\r\n..." or NULL. Sends again,
 * once, on a new connection only when a kept-alive connection turned out
 * closed before any byte of the answer came (so a request is never run
 * twice). Returns 0 or -1. */
BENCH_UNUSED static int bconn_request(struct bconn *c, const char *method, const char *path,
				      const char *extra_headers, const char *body, size_t blen,
				      struct bresp *r)
{
	char head[4096];
	int hl, attempt;

	memset(r, 0, sizeof(*r));
	hl = snprintf(head, sizeof(head),
		      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%s"
		      "Content-Length: %zu\r\n\r\n",
		      method, path, c->port, body ? "Content-Type: application/json\r\n" : "",
		      extra_headers ? extra_headers : "", body ? blen : 0);
	if (hl < 0 || (size_t)hl >= sizeof(head))
		return -1;
	for (attempt = 0; attempt < 2; attempt++) {
		int fresh = c->fd < 0;

		if (fresh && bconn_connect(c) != 0)
			return -1;
		c->rx = 0;
		if (write_all(c->fd, head, (size_t)hl) == 0 &&
		    (!body || write_all(c->fd, body, blen) == 0) &&
		    bconn_read_response(c, r) == 0) {
			if (r->close) {
				close(c->fd);
				c->fd = -1;
			}
			return 0;
		}
		bresp_free(r);
		close(c->fd);
		c->fd = -1;
		if (fresh || c->rx > 0)
			return -1;
	}
	return -1;
}

/* --------------------------------------------------- gatehouse set-up */

/* A running fake upstream and/or gatehouse. */
struct bench_proc {
	pid_t pid;
	int port;
	char out[PATH_MAX];
	char err[PATH_MAX];
};

/* Starts the fake upstream on a free loopback port with `threads`
 * workers; its logs go into dir. */
BENCH_UNUSED static void bench_fake_start(const char *fake_bin, const char *dir, int threads,
					  struct bench_proc *p)
{
	char pf[PATH_MAX], th[16];
	char *argv[] = {(char *)(uintptr_t)fake_bin, "--listen", "127.0.0.1:0", "--port-file", pf,
			"--threads", th, NULL};

	bench_fmt(pf, sizeof(pf), "%s/fake.port", dir);
	snprintf(th, sizeof(th), "%d", threads);
	bench_fmt(p->out, sizeof(p->out), "%s/fake.out", dir);
	bench_fmt(p->err, sizeof(p->err), "%s/fake.err", dir);
	unlink(pf);
	p->pid = bench_spawn(argv, dir, p->out, p->err, NULL);
	p->port = bench_wait_port(pf, p->pid, 0, 20000);
}

/* Runs "gatehouse keys create --config FILE --name NAME [--admin]" and
 * returns the secret (the output's last line) in out. */
BENCH_UNUSED static void bench_key_create(const char *gh_bin, const char *dir, const char *cfg,
					  const char *name, int admin, char *out, size_t cap)
{
	char outp[PATH_MAX], buf[8192], *last, *p;
	char *argv[] = {(char *)(uintptr_t)gh_bin, "keys", "create", "--config",
			(char *)(uintptr_t)cfg, "--name", (char *)(uintptr_t)name,
			admin ? "--admin" : NULL, NULL};
	const char *env[] = {"GH_LOG=warn", NULL};

	bench_fmt(outp, sizeof(outp), "%s/key-%s.out", dir, name);
	unlink(outp);
	if (bench_run(argv, dir, outp, NULL, env, 60000) != 0)
		bench_die("gatehouse keys create failed (config %s)", cfg);
	if (bench_read_file(outp, buf, sizeof(buf)) <= 0)
		bench_die("gatehouse keys create printed nothing");
	while ((p = strrchr(buf, '\n')) && p[1] == '\0')
		*p = '\0';
	last = strrchr(buf, '\n');
	last = last ? last + 1 : buf;
	bench_fmt(out, cap, "%s", last);
}

/* Starts "gatehouse serve --config cfg" in dir with GH_LOG=log_level. */
BENCH_UNUSED static void bench_gh_start(const char *gh_bin, const char *dir, const char *cfg,
					const char *log_level, struct bench_proc *p)
{
	char lvl[64];
	char *argv[] = {(char *)(uintptr_t)gh_bin, "serve", "--config", (char *)(uintptr_t)cfg,
			NULL};
	const char *env[] = {lvl, NULL};

	snprintf(lvl, sizeof(lvl), "GH_LOG=%s", log_level);
	bench_fmt(p->out, sizeof(p->out), "%s/serve.out", dir);
	bench_fmt(p->err, sizeof(p->err), "%s/serve.err", dir);
	unlink(p->out);
	p->pid = bench_spawn(argv, dir, p->out, p->err, env);
	p->port = bench_wait_port(p->out, p->pid, 1, 60000);
}

/* A request on a fresh connection, for set-up steps; dies unless the
 * status is 200. Returns the body (caller frees). */
BENCH_UNUSED static char *bench_http_ok(int port, const char *method, const char *path,
					const char *headers, const char *body)
{
	struct bconn c;
	struct bresp r;
	char *out;

	if (bconn_open(&c, port, 60000) != 0)
		bench_die("cannot connect to 127.0.0.1:%d", port);
	if (bconn_request(&c, method, path, headers, body, body ? strlen(body) : 0, &r) != 0)
		bench_die("%s %s on port %d: no response", method, path, port);
	bconn_close(&c);
	if (r.status != 200)
		bench_die("%s %s on port %d: status %d: %.300s", method, path, port, r.status,
			  r.body ? r.body : "");
	out = r.body;
	r.body = NULL;
	bresp_free(&r);
	return out;
}

/* Host facts for the report header. */
BENCH_UNUSED static void bench_print_host(void)
{
	char buf[1 << 16], model[128] = "?";
	const char *p;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (bench_read_file("/proc/cpuinfo", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "model name"))) {
		p = strchr(p, ':');
		if (p) {
			size_t n = strcspn(p + 2, "\n");

			snprintf(model, sizeof(model), "%.*s", (int)n, p + 2);
		}
	}
	printf("host: %ld CPUs (%s)", cpus, model);
	if (bench_read_file("/proc/loadavg", buf, sizeof(buf)) > 0)
		printf(", loadavg %.*s", (int)strcspn(buf, " "), buf);
	printf("\n");
}

#endif
