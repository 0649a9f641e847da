/*
 * test_target_contract.c — a new flush target plugs in through the
 * contract alone (store/target.h): a toy target, registered at run time,
 * is written, checkpointed by the checkpointer's store (its immutable
 * files staged in shared/, linked once; the rest copied) and restored by
 * its own restore entry, with nothing else in sfs knowing its name.
 *
 * The toy keeps up to 16 one-byte keys with one-byte values in process
 * memory; a snapshot writes them to "shared/run-<seq>" (immutable) and
 * names that file in "CURRENT" (private, rewritten each time); open loads
 * what CURRENT names from its instance <root>/w<N>.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpointer/ckstore.h"
#include "common/err.h"
#include "common/fs.h"
#include "sfs.h"
#include "store/target.h"
#include "worker/wbuf.h"

static char toy_root[PATH_MAX];		/* instance_root()'s, set by the test */
static int toy_val[16];			/* the current version: -1 absent */

struct sfs_target_writer {
	uint32_t worker;
	uint64_t seq;
};

static int toy_instance_root(const char *data, int node, char *buf, size_t len)
{
	snprintf(buf, len, "%s/sfs-toy.%d", data, node);
	return 0;
}

static int toy_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		    const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	static struct sfs_target_writer w;
	char dir[PATH_MAX], path[PATH_MAX * 2], name[64] = "";
	FILE *f;

	w.worker = worker;
	memset(toy_val, -1, sizeof(toy_val));
	cr_assert_eq(sfs_target_instance_dir(toy_root, worker, dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/CURRENT", dir);
	if ((f = fopen(path, "r"))) {	/* adopt a restore */
		cr_assert_eq(fscanf(f, "%63s", name), 1);
		fclose(f);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		cr_assert_not_null(f = fopen(path, "r"), "%s", path);
		for (int k, v; fscanf(f, "%d %d", &k, &v) == 2;)
			toy_val[k] = v;
		fclose(f);
	}
	*out = &w;
	return 0;
}

static int toy_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq)
{
	for (unsigned i = 0; i < n; i++) {
		int k = *(const unsigned char *)v[i].key & 15;

		toy_val[k] = v[i].value ? *(const unsigned char *)v[i].value : -1;
	}
	return 0;
}

static int toy_commit(struct sfs_target_writer *w, uint64_t seq)
{
	w->seq = seq;
	return 0;
}

static int toy_snapshot(struct sfs_target_writer *w, const char *dir)
{
	char path[PATH_MAX * 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/" SFS_STAGE_SHARED, dir);
	if (sfs_mkdirs(path, 0700))
		return -1;
	snprintf(path, sizeof(path), "%s/" SFS_STAGE_SHARED "/run-%llu", dir,
		 (unsigned long long)w->seq);
	if (!(f = fopen(path, "w")))
		return -1;
	for (int k = 0; k < 16; k++)
		if (toy_val[k] >= 0)
			fprintf(f, "%d %d\n", k, toy_val[k]);
	fclose(f);
	snprintf(path, sizeof(path), "%s/CURRENT", dir);
	if (!(f = fopen(path, "w")))
		return -1;
	fprintf(f, "run-%llu\n", (unsigned long long)w->seq);
	return fclose(f);
}

static void toy_close(struct sfs_target_writer *w)
{
}

static int toy_restore(const struct sfs_target_env *e, uint32_t worker,
		       int (*put)(void *arg, const char *dir), void *arg)
{
	char dir[PATH_MAX];

	/* open() adopts what CURRENT names */
	return sfs_target_instance_put(e, worker, put, arg, dir, sizeof(dir));
}

static const struct sfs_target_ops toy = {
	.name = "toy",
	.open = toy_open,
	.apply = toy_apply,
	.commit = toy_commit,
	.snapshot = toy_snapshot,
	.close = toy_close,
	.instance_root = toy_instance_root,
	.restore = toy_restore,
};

static void put_kv(const struct sfs_target_ops *t, struct sfs_target_writer *w, uint64_t seq,
		   const char *kv)
{
	struct sfs_wbuf_view v[8];
	unsigned n = 0;

	for (; kv[0]; kv += 2, n++)
		v[n] = (struct sfs_wbuf_view){ .key = kv, .klen = 1,
					       .value = kv[1] == '-' ? NULL : kv + 1,
					       .len = kv[1] != '-', .kind = SFS_WBUF_PUT };
	cr_assert_eq(t->apply(w, v, n, seq), 0);
	cr_assert_eq(t->commit(w, seq), 0);
}

/* Checkpoint @id of the toy's worker 0, staged in @stage. */
static void checkpoint(struct ck_store *s, uint64_t id, const char *stage,
		       struct ck_txn_stats *st)
{
	struct ck_table table = { 0, id };
	struct ck_meta m = { .workers = 1, .ntables = 1,
			     .tables = &table, .sink_epoch = id };
	struct ck_txn *t;

	snprintf(m.config, sizeof(m.config), "backend=toy");
	cr_assert_eq(sfs__ck_txn_begin(s, id, &t), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_txn_add_dir(t, 0, stage), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_txn_commit(t, &m, st), 0, "%s", sfs_last_error());
}

struct put_arg {
	struct ck_meta *m;
	const char *root;
};

static int put_files(void *arg, const char *dir)
{
	struct put_arg *p = arg;

	return sfs__ck_restore_worker(p->m, p->root, 0, dir);
}

Test(target_contract, a_registered_target_checkpoints_and_restores_through_its_ops_alone)
{
	char tmp[] = "/tmp/sfs-toy-XXXXXX", ck[PATH_MAX], stage[PATH_MAX + 16], chk[PATH_MAX + 16];
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	const struct sfs_target_ops *t;
	struct ck_txn_stats st1, st2;
	struct ck_store *s;
	struct ck_meta m;

	cr_assert_not_null(mkdtemp(tmp));
	cr_assert_eq(sfs_target_register(&toy), 0, "%s", sfs_last_error());
	cr_assert_neq(sfs_target_register(&toy), 0, "a name registered twice");
	cr_assert_not_null(strstr(sfs_last_error(), "toy"));
	cr_assert_eq(t = sfs_target_find("toy"), &toy);
	cr_assert_eq(t->instance_root(tmp, 0, toy_root, sizeof(toy_root)), 0);

	snprintf(ck, sizeof(ck), "%s/checkpoints", tmp);
	cr_assert_eq(sfs__ck_store_open(ck, "toyjob", 3, 0, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(t->open(NULL, 0, NULL, &cfg, &w), 0);
	put_kv(t, w, 1, "a1b2");
	snprintf(stage, sizeof(stage), "%s/stage1", tmp);
	cr_assert_eq(t->snapshot(w, stage), 0);
	checkpoint(s, 1, stage, &st1);
	put_kv(t, w, 2, "b-c3");
	snprintf(stage, sizeof(stage), "%s/stage2", tmp);
	cr_assert_eq(t->snapshot(w, stage), 0);
	checkpoint(s, 2, stage, &st2);
	t->close(w);
	sfs__ck_store_close(s);
	/* shared/run-<seq> linked once, CURRENT copied: the target said so */
	cr_assert_eq(st1.links, 1);
	cr_assert_eq(st1.copies, 1);
	cr_assert_eq(st2.links, 1);
	cr_assert_eq(st2.copies, 1);

	/* Restore checkpoint 1 through the target's own entry, then open. */
	snprintf(chk, sizeof(chk), "%s/chk-1", ck);
	memset(&m, 0, sizeof(m));
	cr_assert_eq(sfs__ck_read(chk, "toyjob", 1, &m), 0, "%s", sfs_last_error());
	{
		struct sfs_target_env e = { .seg = NULL, .root = toy_root, .cfg = &cfg };
		struct put_arg p = { &m, ck };

		cr_assert_eq(t->restore(&e, 0, put_files, &p), 0, "%s", sfs_last_error());
	}
	sfs__ck_meta_free(&m);
	cr_assert_eq(t->open(NULL, 0, NULL, &cfg, &w), 0);
	cr_assert_eq(toy_val['a' & 15], '1');
	cr_assert_eq(toy_val['b' & 15], '2');
	cr_assert_eq(toy_val['c' & 15], -1, "checkpoint 2's write is not in checkpoint 1");
	t->close(w);
	sfs_rmtree(tmp);
}
