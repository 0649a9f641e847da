/*
 * fuzz_main.c — the fallback driver for machines without libFuzzer: a
 * main() that runs LLVMFuzzerTestOneInput over every file of a corpus
 * directory, then over random mutations of them (byte flips, overwrites,
 * truncations, splices) until a time bound, built with gcc + ASan/UBSan.
 * No coverage feedback: a weaker fuzzer, but the same target and checks.
 * RUNS, if given, also bounds the mutated inputs (make fuzz-long).
 *
 *   fuzz_main CORPUS_DIR SECONDS [RUNS]
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	uint8_t *p;
	size_t n;
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	struct input in[256];
	size_t nin = 0;
	uint64_t s = (uint64_t)time(NULL), runs = 0, max_runs = UINT64_MAX;
	time_t end;
	DIR *d;
	struct dirent *e;

	if ((argc != 3 && argc != 4) || !(d = opendir(argv[1]))) {
		fprintf(stderr, "usage: fuzz_main CORPUS_DIR SECONDS [RUNS]\n");
		return 2;
	}
	if (argc == 4)
		max_runs = strtoull(argv[3], NULL, 10);
	end = time(NULL) + atoi(argv[2]);
	while ((e = readdir(d)) && nin < 256) {
		char p[4096];
		struct stat sb;
		FILE *f;

		snprintf(p, sizeof(p), "%s/%s", argv[1], e->d_name);
		if (stat(p, &sb) || !S_ISREG(sb.st_mode) || !(f = fopen(p, "rb")))
			continue;
		in[nin].n = (size_t)sb.st_size;
		in[nin].p = malloc(in[nin].n + 1);
		in[nin].n = fread(in[nin].p, 1, in[nin].n, f);
		fclose(f);
		LLVMFuzzerTestOneInput(in[nin].p, in[nin].n);
		nin++;
	}
	closedir(d);
	if (!nin)
		return fprintf(stderr, "fuzz_main: empty corpus %s\n", argv[1]), 1;
	while (runs < max_runs && ((runs & 1023) || time(NULL) < end)) {
		const struct input *a = &in[rnd(&s) % nin], *b = &in[rnd(&s) % nin];
		size_t n = a->n;
		uint8_t *m = malloc(n + 1);

		memcpy(m, a->p, n);
		for (int k = 0, muts = 1 + (int)(rnd(&s) % 8); k < muts && n; k++) {
			size_t at = rnd(&s) % n;

			switch (rnd(&s) % 4) {
			case 0: m[at] ^= (uint8_t)(1u << (rnd(&s) % 8)); break;
			case 1: m[at] = (uint8_t)rnd(&s); break;
			case 2: n = at + 1; break;
			default: {
				size_t from = rnd(&s) % b->n, len = rnd(&s) % 64;

				if (from + len > b->n)
					len = b->n - from;
				if (at + len > n)
					len = n - at;
				memcpy(m + at, b->p + from, len);
			}
			}
		}
		LLVMFuzzerTestOneInput(m, n);
		free(m);
		runs++;
	}
	printf("fuzz_main: %llu mutated inputs over %zu seeds, no crash\n", (unsigned long long)runs, nin);
	for (size_t i = 0; i < nin; i++)
		free(in[i].p);
	return 0;
}
