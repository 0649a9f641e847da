/*
 * save.h — the bytes a harness hands its reader, written to the file named
 * by SFS_FUZZ_SAVE when set (after the mode byte is applied: resealed or
 * raw), so a finding becomes a regression input under tests/fuzz/regress/
 * <target>/ that tests/test_fuzz_regress.c feeds to the reader itself:
 *
 *   SFS_FUZZ_SAVE=tests/fuzz/regress/sinklog/NAME build/fuzz/fuzz_sinklog CRASH-FILE
 */
#ifndef SFS_TESTS_FUZZ_SAVE_H
#define SFS_TESTS_FUZZ_SAVE_H
#include <stdio.h>
#include <stdlib.h>

static inline void fuzz_save(const void *p, size_t n)
{
	const char *to = getenv("SFS_FUZZ_SAVE");
	FILE *f;

	if (to && (f = fopen(to, "wb"))) {
		fwrite(p, 1, n, f);
		fclose(f);
	}
}
#endif
