/*
 * driver.c - replays a fuzz target without libFuzzer (gcc builds, the
 * fuzz-smoke CTest label): every corpus file whole, every prefix of it
 * (truncation), and a fixed number of deterministic mutations (bit flips,
 * byte inserts and deletes, splices of two inputs). Build with -DGH_FUZZ=ON
 * under clang for real coverage-guided fuzzing.
 *
 *   fuzz_x CORPUS_DIR [ITERATIONS]
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	unsigned char *data;
	size_t len;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static int load(const char *path, struct input *in)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -1;
	}
	in->data = malloc((size_t)n + 1);
	if (!in->data || fread(in->data, 1, (size_t)n, f) != (size_t)n) {
		free(in->data);
		fclose(f);
		return -1;
	}
	in->len = (size_t)n;
	fclose(f);
	return 0;
}

/* Runs one input from a private heap copy, so ASan sees reads past it. */
static void run(const unsigned char *p, size_t n)
{
	unsigned char *copy = malloc(n ? n : 1);

	if (!copy)
		abort();
	if (n)
		memcpy(copy, p, n);
	LLVMFuzzerTestOneInput(copy, n);
	free(copy);
}

int main(int argc, char **argv)
{
	struct input inputs[512];
	size_t ninputs = 0, i, k;
	long iterations = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
	unsigned char *m;
	DIR *d;
	struct dirent *de;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR [ITERATIONS]\n", argv[0]);
		return 2;
	}
	d = opendir(argv[1]);
	if (!d) {
		fprintf(stderr, "%s: cannot open corpus %s\n", argv[0], argv[1]);
		return 1;
	}
	while ((de = readdir(d)) && ninputs < 512) {
		char path[4096];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], de->d_name);
		if (load(path, &inputs[ninputs]) == 0)
			ninputs++;
	}
	closedir(d);
	if (ninputs == 0) {
		fprintf(stderr, "%s: empty corpus %s\n", argv[0], argv[1]);
		return 1;
	}
	for (i = 0; i < ninputs; i++)
		for (k = 0; k <= inputs[i].len; k++)
			run(inputs[i].data, k);
	m = malloc(1 << 17);
	if (!m)
		return 1;
	for (long it = 0; it < iterations; it++) {
		struct input *a = &inputs[rng() % ninputs], *b = &inputs[rng() % ninputs];
		size_t n = a->len, flips = 1 + rng() % 8;

		if (n > (1 << 16))
			n = 1 << 16;
		memcpy(m, a->data, n);
		for (k = 0; k < flips; k++) {
			switch (rng() % 5) {
			case 0: /* flip a bit */
				if (n)
					m[rng() % n] ^= (unsigned char)(1u << (rng() % 8));
				break;
			case 1: /* insert a byte */
				if (n < (1 << 17) - 1) {
					size_t at = n ? rng() % n : 0;

					memmove(m + at + 1, m + at, n - at);
					m[at] = (unsigned char)rng();
					n++;
				}
				break;
			case 2: /* delete a byte */
				if (n) {
					size_t at = rng() % n;

					memmove(m + at, m + at + 1, n - at - 1);
					n--;
				}
				break;
			case 3: { /* splice the tail of another input */
				size_t at = n ? rng() % n : 0, from = b->len ? rng() % b->len : 0;
				size_t take = b->len - from;

				if (at + take > (1 << 17))
					take = (1 << 17) - at;
				memcpy(m + at, b->data + from, take);
				n = at + take;
				break;
			}
			default: /* duplicate a chunk (long lines, repeated events) */
				if (n && n < (1 << 16)) {
					size_t at = rng() % n, len = 1 + rng() % (n - at);

					if (n + len <= (1 << 17)) {
						memmove(m + at + len, m + at, n - at);
						n += len;
					}
				}
			}
		}
		run(m, n);
	}
	free(m);
	for (i = 0; i < ninputs; i++)
		free(inputs[i].data);
	printf("%zu corpus inputs, their prefixes and %ld mutations: no crash\n", ninputs,
	       iterations);
	return 0;
}
