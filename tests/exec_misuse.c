/*
 * exec_misuse.c — a worker program that breaks one rule of the checkpoint
 * lifecycle (include/sfs.h), run by tests/e2e_example.sh with `sfs run
 * --exec`: the call must be refused with SFS_EUSAGE and a message, which
 * the program prints as one line before it exits 2 (a usage error: the run
 * fails with 2, and no checkpoint already taken is touched).
 *
 *   exec_misuse backwards   seal checkpoint N, then N again
 *   exec_misuse bytes       seal with SFS_TASK_BYTES_MAX + 1 bytes
 *   exec_misuse early       seal a checkpoint that was never requested
 *   exec_misuse kind        "s" registered as a map, then as a value (the
 *                           registry is the group's: another worker's
 *                           registration meets the same refusal)
 *   exec_misuse nobarrier   seal a requested checkpoint without sealing
 *                           the keyed state for it (sfs_barrier) first
 *   exec_misuse unrequested a barrier of an id above the newest requested
 *   exec_misuse shape       open with another parallelism than the group's
 *                           (then the right one must still open)
 *   exec_misuse unfinished  write state, then exit 0 without sealing or
 *                           sfs_task_finish: nothing refuses it, the group
 *                           says so in one line naming the worker
 *
 * And one lawful run the group once reported falsely (exit 0 is success):
 *   exec_misuse finish-early  worker 0 finishes after its first completed
 *                           checkpoint; worker 1 goes on, and in its first
 *                           run dies (exit 1) two completed checkpoints
 *                           later: the rollback in place takes worker 0
 *                           back to the version the later checkpoints carry
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sfs.h>

static int refused(const char *what, int rc)
{
	if (rc != SFS_EUSAGE) {
		fprintf(stderr, "exec_misuse: %s: %s, want SFS_EUSAGE\n", what, sfs_strerror(rc));
		return 1;
	}
	fprintf(stderr, "exec_misuse: %s refused: %s\n", what, sfs_last_error());
	return 2;
}

int main(int argc, char **argv)
{
	const char *job = getenv("SFS_JOB");
	uint32_t me = (uint32_t)atoi(getenv("SFS_WORKER") ? getenv("SFS_WORKER") : "0");
	struct sfs_worker_opts o = { .parallelism = (uint32_t)atoi(getenv("SFS_WORKERS") ?
								   getenv("SFS_WORKERS") : "1") };
	static char big[SFS_TASK_BYTES_MAX + 1];
	struct sfs_task_info info;
	sfs_task_t *t;
	sfs_ctx_t *c;
	uint64_t n;
	uint32_t id;
	int rc;

	if (argc != 2 || !job)
		return 2;
	if (!strcmp(argv[1], "shape")) {
		struct sfs_worker_opts wrong = { .parallelism = o.parallelism + 1 };

		rc = sfs_worker_open(job, SFS_NODE_ANY, me, &wrong, &c);
		if (rc != SFS_EUSAGE)
			return refused("another parallelism", rc);
		fprintf(stderr, "exec_misuse: another parallelism refused: %s\n", sfs_last_error());
		if ((rc = sfs_worker_open(job, SFS_NODE_ANY, me, &o, &c))) {
			fprintf(stderr, "exec_misuse: the right open after it: %s\n", sfs_last_error());
			return 1;
		}
		return 2;
	}
	if ((rc = sfs_worker_open(job, SFS_NODE_ANY, me, &o, &c)) || (rc = sfs_worker_task(c, &t))) {
		fprintf(stderr, "exec_misuse: open: %s\n", sfs_last_error());
		return 1;
	}
	if (!strcmp(argv[1], "unfinished")) {
		char k[16];

		if (sfs_state_register(c, "s", SFS_STATE_VALUE, &id))
			return 1;
		/* a key of a key group this worker owns */
		for (int i = 0; i < 4096; i++)
			if (sfs_value_put(c, id, 0, k, (size_t)snprintf(k, sizeof(k), "k%d", i), "v",
					  1) == 0)
				return 0;
		return 1;
	}
	if (!strcmp(argv[1], "finish-early")) {
		uint64_t last;
		int seals = 0;
		char k[16];

		sfs_task_info(t, &info);
		last = info.base_id;
		if (sfs_state_register(c, "s", SFS_STATE_VALUE, &id))
			return 1;
		for (int i = 0;; i++) {
			/* a write of a key this worker owns, then the next barrier */
			for (int j = 0; j < 4096; j++)
				if (sfs_value_put(c, id, 0, k,
						  (size_t)snprintf(k, sizeof(k), "k%d", i * 4096 + j),
						  "v", 1) == 0)
					break;
			while ((n = sfs_task_requested(t)) <= last)
				usleep(1000);
			if (sfs_barrier(c, n) || sfs_task_sealed(t, n, "x", 1) ||
			    sfs_task_wait_completed(t, n, 30000000000ull))
				return 1;
			last = n;
			seals++;
			if (me == 0 && seals >= 1)
				return sfs_task_finish(t) ? 1 : 0;
			if (me == 1 && seals >= 3) {
				if (info.start == SFS_START_FRESH)
					return 1;	/* the death, in the first run only */
				return sfs_task_finish(t) ? 1 : 0;
			}
		}
	}
	if (!strcmp(argv[1], "kind")) {
		if (sfs_state_register(c, "s", SFS_STATE_MAP, &id))
			return 1;
		return refused("a state of another kind", sfs_state_register(c, "s", SFS_STATE_VALUE, &id));
	}
	sfs_task_info(t, &info);
	if (!strcmp(argv[1], "early"))
		return refused("an unrequested checkpoint", sfs_task_sealed(t, info.base_id + 5, "x", 1));
	while ((n = sfs_task_requested(t)) <= info.base_id)
		usleep(1000);
	if (!strcmp(argv[1], "nobarrier"))
		return refused("a seal without its barrier", sfs_task_sealed(t, n, "x", 1));
	if (!strcmp(argv[1], "unrequested"))
		return refused("an unrequested barrier", sfs_barrier(c, n + 1));
	if ((rc = sfs_barrier(c, n)))
		return 1;
	if (!strcmp(argv[1], "bytes"))
		return refused("bytes over the limit", sfs_task_sealed(t, n, big, sizeof(big)));
	if ((rc = sfs_task_sealed(t, n, "x", 1)))
		return 1;
	return refused("a checkpoint id that goes backwards", sfs_task_sealed(t, n, "x", 1));
}
