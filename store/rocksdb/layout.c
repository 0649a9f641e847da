/*
 * layout.c — the fingerprint of the rocksdb target's struct in shared
 * memory (store/layout.c folds it into every segment's): apart from the
 * engine's files, which link RocksDB, so that a process without RocksDB
 * (the JNI library a JVM loads, flink/jni/) computes the same fingerprint
 * and attaches to the same segments.
 */
#include "common/fingerprint.h"
#include "store/rocksdb/rocksdb.h"

uint64_t sfs_rdbt_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_rdbt_pub);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_published);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_applied);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_cf_gen);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_purges);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_errors);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_knobs);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_ingest_min);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_ttl_dropped);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_incarnation);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_rollbacks);
	return h;
}
