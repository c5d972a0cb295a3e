/*
 * bench_connect.c - what a new client connection costs through gatehouse's
 * connection front (src/front.h), against the same for the fake upstream,
 * which accepts on its own listening socket.
 *
 * For each server, two blocks of --requests small GETs (gatehouse's
 * /healthz, the fake's /v1/models), one at a time:
 *   kept-alive  all on one connection;
 *   new         each on a connection of its own: connect, request, read
 *               the whole answer, close; timed from connect().
 * A server's connection cost is its new p50 minus its kept-alive p50: the
 * request's own work is in both and drops out, what is left is accepting
 * the connection and handing it to the thread that answers. gatehouse's
 * added cost per new connection is its connection cost minus the fake's,
 * per repetition; the table shows medians over repetitions. The blocks
 * rotate from one repetition to the next so drift hits all of them.
 * gatehouse's CPU time and context switches per request over each of its
 * blocks come from /proc.
 *
 *   bench_connect [--requests N] [--reps R] [--warmup N]
 *
 * Single-threaded: one request in flight at a time.
 */
#include "bench.h"

struct opts {
	int64_t requests;
	int64_t reps;
	int64_t warmup;
};

struct block {
	double p50, p99;       /* us */
	double cpu_us, ctxsw;  /* gatehouse's, per request (0 for the fake) */
};

/* One GET on c (a new connection when fresh): its time in *ns. 0 or -1. */
static int one(int port, const char *path, struct bconn *c, int fresh, int64_t *ns)
{
	struct bresp r;
	int64_t t0 = bench_ns();
	int rc;

	if (fresh && bconn_open(c, port, 10000) != 0)
		return -1;
	rc = bconn_request(c, "GET", path, fresh ? "Connection: close\r\n" : NULL, NULL, 0, &r);
	if (fresh)
		bconn_close(c);
	*ns = bench_ns() - t0;
	if (rc == 0 && r.status != 200)
		rc = -1;
	bresp_free(&r);
	return rc;
}

static struct block run_block(const struct opts *o, int port, const char *path, int fresh,
			      pid_t watch, int64_t *samples)
{
	struct bconn c;
	struct block b;
	struct bench_stats st;
	int64_t cpu0 = 0, cs0 = 0, i;

	memset(&b, 0, sizeof(b));
	if (!fresh && bconn_open(&c, port, 10000) != 0)
		bench_die("cannot connect to 127.0.0.1:%d", port);
	if (watch > 0) {
		cpu0 = bench_cpu_ns(watch);
		cs0 = bench_ctxsw(watch);
	}
	for (i = 0; i < o->requests; i++)
		if (one(port, path, &c, fresh, &samples[i]) != 0)
			bench_die("GET %s on port %d failed (request %lld)", path, port,
				  (long long)i);
	if (watch > 0) {
		b.cpu_us = (double)(bench_cpu_ns(watch) - cpu0) / 1e3 / (double)o->requests;
		b.ctxsw = (double)(bench_ctxsw(watch) - cs0) / (double)o->requests;
	}
	if (!fresh)
		bconn_close(&c);
	st = bench_summary(samples, (size_t)o->requests, 1e3);
	b.p50 = st.p50;
	b.p99 = st.p99;
	return b;
}

int main(int argc, char **argv)
{
	struct opts o = {2000, 5, 200};
	char gh[PATH_MAX], fakebin[PATH_MAX], dir[PATH_MAX], cfg[PATH_MAX];
	struct bench_proc fake, gw;
	/* [server][fresh] per rep: server 0 the fake, 1 gatehouse */
	double *p50[2][2], *p99[2][2], *cpu[2], *cs[2], *cost[2], *added;
	int64_t *samples, r;
	int i, s, f;

	bench_init();
	for (i = 1; i < argc; i++) {
		const char *v;

		if ((v = bench_opt(argc, argv, &i, "--requests")))
			o.requests = bench_num(v, 100, 1000000, "--requests");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			o.reps = bench_num(v, 1, 100, "--reps");
		else if ((v = bench_opt(argc, argv, &i, "--warmup")))
			o.warmup = bench_num(v, 0, 100000, "--warmup");
		else
			bench_die("usage: bench_connect [--requests N] [--reps R] [--warmup N]");
	}
	samples = calloc((size_t)(o.requests > o.warmup ? o.requests : o.warmup),
			 sizeof(int64_t));
	added = calloc((size_t)o.reps, sizeof(double));
	for (s = 0; s < 2; s++) {
		for (f = 0; f < 2; f++) {
			p50[s][f] = calloc((size_t)o.reps, sizeof(double));
			p99[s][f] = calloc((size_t)o.reps, sizeof(double));
			if (!p50[s][f] || !p99[s][f])
				bench_die("out of memory");
		}
		cpu[s] = calloc((size_t)o.reps * 2, sizeof(double));
		cs[s] = calloc((size_t)o.reps * 2, sizeof(double));
		cost[s] = calloc((size_t)o.reps, sizeof(double));
		if (!cpu[s] || !cs[s] || !cost[s])
			bench_die("out of memory");
	}
	if (!samples || !added)
		bench_die("out of memory");
	bench_nofile(4096);
	bench_paths(gh, fakebin, sizeof(gh));
	bench_tmpdir(dir, sizeof(dir), "connect");
	bench_fake_start(fakebin, dir, 32, &fake);
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", dir);
	{
		char conf[2048];

		bench_fmt(conf, sizeof(conf),
			  "{\"server\":{\"listen\":\"127.0.0.1:0\",\"threads\":32,\"max_streams\":8,"
			  "\"max_connections_per_address\":0},"
			  "\"database\":{\"path\":\"gatehouse.db\"},"
			  "\"providers\":{\"up\":{\"type\":\"openai\",\"base_url\":"
			  "\"http://127.0.0.1:%d/v1\",\"api_key\":\"sk-bench\"}},"
			  "\"agents\":{\"a\":{\"provider\":\"up\",\"model\":\"m\"}},"
			  "\"policies\":{\"default\":{\"agents\":[\"*\"]}}}", fake.port);
		bench_write_file(cfg, conf);
	}
	bench_gh_start(gh, dir, cfg, "warn", &gw);

	{
		struct opts w = o;

		w.requests = o.warmup > 100 ? o.warmup : 100;
		for (s = 0; s < 2; s++)
			for (f = 0; f < 2; f++)
				run_block(&w, s ? gw.port : fake.port, s ? "/healthz" : "/v1/models",
					  f, 0, samples);
	}
	bench_print_host();
	printf("\nnew client connections: %lld GETs per block, one at a time, %lld reps "
	       "(gatehouse GET /healthz, the fake GET /v1/models)\n", (long long)o.requests,
	       (long long)o.reps);
	for (r = 0; r < o.reps; r++) {
		int k;

		/* four blocks, rotated by the repetition */
		for (k = 0; k < 4; k++) {
			int b = (int)((k + r) % 4);
			struct block res;

			s = b / 2;
			f = b % 2;
			res = run_block(&o, s ? gw.port : fake.port, s ? "/healthz" : "/v1/models", f,
					s ? gw.pid : 0, samples);
			p50[s][f][r] = res.p50;
			p99[s][f][r] = res.p99;
			cpu[s][r * 2 + f] = res.cpu_us;
			cs[s][r * 2 + f] = res.ctxsw;
		}
		for (s = 0; s < 2; s++)
			cost[s][r] = p50[s][1][r] - p50[s][0][r];
		added[r] = cost[1][r] - cost[0][r];
	}

	printf("\n| server | kept-alive p50 us | kept-alive p99 us | new p50 us | new p99 us |"
	       " connection cost p50 us | CPU us per request (kept-alive / new) |"
	       " context switches per request (kept-alive / new) |\n"
	       "|---|---|---|---|---|---|---|---|\n");
	for (s = 0; s < 2; s++) {
		double ka_cpu[100], new_cpu[100], ka_cs[100], new_cs[100];

		for (r = 0; r < o.reps; r++) {
			ka_cpu[r] = cpu[s][r * 2];
			new_cpu[r] = cpu[s][r * 2 + 1];
			ka_cs[r] = cs[s][r * 2];
			new_cs[r] = cs[s][r * 2 + 1];
		}
		printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |", s ? "gatehouse" : "fake upstream",
		       bench_median(p50[s][0], (size_t)o.reps), bench_median(p99[s][0], (size_t)o.reps),
		       bench_median(p50[s][1], (size_t)o.reps), bench_median(p99[s][1], (size_t)o.reps),
		       bench_median(cost[s], (size_t)o.reps));
		if (s)
			printf(" %.1f / %.1f | %.2f / %.2f |\n", bench_median(ka_cpu, (size_t)o.reps),
			       bench_median(new_cpu, (size_t)o.reps),
			       bench_median(ka_cs, (size_t)o.reps),
			       bench_median(new_cs, (size_t)o.reps));
		else
			printf(" - | - |\n");
	}
	printf("\nadded by gatehouse per new connection (its connection cost minus the fake's), "
	       "p50: median %.1f us, min %.1f, max %.1f over reps\n",
	       bench_median(added, (size_t)o.reps), bench_min(added, (size_t)o.reps),
	       bench_maxd(added, (size_t)o.reps));

	bench_stop(gw.pid, 10000);
	bench_stop(fake.pid, 10000);
	bench_rmrf(dir);
	for (s = 0; s < 2; s++) {
		for (f = 0; f < 2; f++) {
			free(p50[s][f]);
			free(p99[s][f]);
		}
		free(cpu[s]);
		free(cs[s]);
		free(cost[s]);
	}
	free(added);
	free(samples);
	return 0;
}
