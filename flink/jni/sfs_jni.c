/*
 * sfs_jni.c — the native half of sfs-flink: Flink's keyed-state calls on
 * sfs's public API (include/sfs.h) and nothing else.
 *
 * Built by `make flink` into build/jni/libsfs_jni.so from this file and
 * libsfs's sources compiled with SFS_NO_ROCKSDB: a JVM that runs Flink's
 * RocksDB or ForSt backend loads their RocksDB build, and a second one in
 * the process clashes on symbols (FLINK.md).  Only Java_* and JNI_OnLoad
 * are exported (flink/jni/exports.map), so none of libsfs's names can
 * interpose on another library's either.
 *
 * Who calls what (io.sfs.flink.jni.SfsNative is the Java side):
 *  - A context (struct jctx) is one sfs worker: one Flink subtask's keyed
 *    backend.  Its state calls come from the subtask's task thread only;
 *    sfs_worker_staged/stage_scan/stage_drop from the snapshot's async
 *    thread (sfs.h allows both at once: those read only shared words).
 *  - Key and value bytes travel in one direct ByteBuffer per context (the
 *    "io" buffer, registered with setIo, grown by Java when a call answers
 *    NEED(n)): the arguments are lengths, the bytes are at fixed places.
 *
 * What one state operation costs: ONE JNI crossing (a static native with
 * primitive arguments: no object passed, no JNIEnv call on the way in),
 * no allocation, and one copy — Java's serializer writes straight into the
 * direct buffer, sfs copies it into its write buffer (the store's own
 * copy); a read copies sfs's zero-copy view out into the direct buffer
 * once, where Java's deserializer reads it.  Inside: sfs_ctx_online (a
 * store and a store-load fence), sfs_ctx_key_group (a compare and a
 * store), the sfs call, sfs_ctx_offline (a store): an idle Flink task then
 * holds up no grace period of the group's compactor.  Errors throw
 * io.sfs.flink.jni.SfsException with sfs_last_error()'s message.
 */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfs.h"

/* A read whose answer does not fit the io buffer returns NEED(bytes). */
#define NEED(n) (-2 - (jint)(n))
#define ABSENT (-1)

struct jctx {
	sfs_ctx_t *c;
	unsigned char *io;
	size_t cap;
	unsigned char key[SFS_KEY_MAX]; /* a key the answer overwrites in io */
};

static jclass exc_class;    /* io.sfs.flink.jni.SfsException (global ref) */
static jmethodID scan_entry; /* SfsNative.ScanSink.entry */

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
	JNIEnv *env;
	jclass c;

	(void)reserved;
	if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK)
		return JNI_ERR;
	c = (*env)->FindClass(env, "io/sfs/flink/jni/SfsException");
	if (!c)
		return JNI_ERR;
	exc_class = (*env)->NewGlobalRef(env, c);
	c = (*env)->FindClass(env, "io/sfs/flink/jni/SfsNative$ScanSink");
	if (!c)
		return JNI_ERR;
	scan_entry = (*env)->GetMethodID(env, c, "entry", "(IIJ[B[B[B)V");
	if (!scan_entry)
		return JNI_ERR;
	return JNI_VERSION_1_8;
}

/* Throw SfsException for @rc (< 0); returns @rc for the caller's return. */
static jint fail(JNIEnv *env, int rc, const char *what)
{
	char msg[1024];
	const char *detail = sfs_last_error();

	snprintf(msg, sizeof(msg), "sfs: %s: %s (%s)", what, detail && detail[0] ? detail : "-",
		 sfs_strerror(rc));
	(*env)->ThrowNew(env, exc_class, msg);
	return rc;
}

static inline struct jctx *J(jlong h)
{
	return (struct jctx *)(intptr_t)h;
}

/* Every state call is bracketed by these: online and in key group @kg. */
static inline int enter(JNIEnv *env, struct jctx *j, jint kg)
{
	int rc;

	sfs_ctx_online(j->c);
	rc = sfs_ctx_key_group(j->c, (uint32_t)kg);
	if (rc) {
		sfs_ctx_offline(j->c);
		fail(env, rc, "key group");
	}
	return rc;
}

static inline void leave(struct jctx *j)
{
	sfs_ctx_offline(j->c);
}

/* A state call with no answer: online in key group @kg, @call, offline;
 * its error thrown as SfsException. */
#define STATE_CALL(env, j, kg, what, call)                                       \
	do {                                                                     \
		int rc_;                                                         \
		if (enter((env), (j), (kg)))                                     \
			return;                                                  \
		rc_ = (call);                                                    \
		leave(j);                                                        \
		if (rc_)                                                         \
			fail((env), rc_, (what));                                \
	} while (0)

/* ---- lifecycle ------------------------------------------------------------------ */

JNIEXPORT jlong JNICALL Java_io_sfs_flink_jni_SfsNative_open(JNIEnv *env, jclass cls, jstring job,
							      jint slot, jint maxp, jint first,
							      jint last, jlong buffer_bytes,
							      jlong cache_bytes, jboolean reset)
{
	struct sfs_worker_opts o = {
		.max_parallelism = (uint32_t)maxp,
		.buffer_bytes = (uint64_t)buffer_bytes,
		.cache_bytes = (uint64_t)cache_bytes,
		.flags = SFS_WORKER_KG_RANGE | SFS_WORKER_CALLER_KG | (reset ? SFS_WORKER_RESET : 0),
		.kg_first = (uint32_t)first,
		.kg_last = (uint32_t)last,
	};
	const char *name = (*env)->GetStringUTFChars(env, job, NULL);
	struct jctx *j;
	int rc;

	(void)cls;
	if (!name)
		return 0;
	j = calloc(1, sizeof(*j));
	if (!j) {
		(*env)->ReleaseStringUTFChars(env, job, name);
		fail(env, -12, "open");
		return 0;
	}
	rc = sfs_worker_open(name, SFS_NODE_ANY, (uint32_t)slot, &o, &j->c);
	(*env)->ReleaseStringUTFChars(env, job, name);
	if (rc) {
		free(j);
		if (rc != SFS_ERUNNING)	/* held by another context: 0, the caller tries another */
			fail(env, rc, "open a worker");
		return 0;
	}
	/* Idle until the first state call (see the file's comment). */
	sfs_ctx_offline(j->c);
	return (jlong)(intptr_t)j;
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_setIo(JNIEnv *env, jclass cls, jlong h,
							      jobject buf)
{
	struct jctx *j = J(h);

	(void)cls;
	j->io = (*env)->GetDirectBufferAddress(env, buf);
	j->cap = (size_t)(*env)->GetDirectBufferCapacity(env, buf);
	if (!j->io)
		fail(env, SFS_EUSAGE, "setIo: not a direct buffer");
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_close(JNIEnv *env, jclass cls, jlong h)
{
	struct jctx *j = J(h);

	(void)env, (void)cls;
	if (!j)
		return;
	sfs_ctx_online(j->c);
	sfs_worker_close(j->c);
	free(j);
}

/* A state with a TTL (@ttl_ms > 0) stores sfs's own expiry in front of
 * Flink's bytes (common/ttl.h: stamped at each write by the worker's
 * processing clock, read after Flink took its TtlValue timestamp, so it is
 * never earlier than Flink's): sfs hides and its maintenance drops what
 * has expired, and Flink's TTL wrapper still decides what a read returns. */
JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_register(JNIEnv *env, jclass cls, jlong h,
								 jstring jname, jint kind,
								 jlong ttl_ms)
{
	struct jctx *j = J(h);
	const char *name = (*env)->GetStringUTFChars(env, jname, NULL);
	struct sfs_ttl ttl = { .ttl_ms = (uint64_t)ttl_ms };
	uint32_t id = 0;
	int rc;

	(void)cls;
	if (!name)
		return -1;
	sfs_ctx_online(j->c);
	rc = ttl_ms > 0 ? sfs_state_register_ttl(j->c, name, kind, &ttl, &id)
			: sfs_state_register(j->c, name, kind, &id);
	sfs_ctx_offline(j->c);
	(*env)->ReleaseStringUTFChars(env, jname, name);
	if (rc)
		return fail(env, rc, "register a state");
	return (jint)id;
}

/* ---- value state --------------------------------------------------------------- */

/* Copy view @v out to the io buffer: its length, or NEED. */
static inline jint out_view(struct jctx *j, const struct sfs_view *v)
{
	if (v->len > j->cap)
		return NEED(v->len);
	memcpy(j->io, v->data, v->len);
	return (jint)v->len;
}

/* A call's answer: @rc < 0 is sfs's error, thrown (Java never reads the
 * return value then); else what the call computed. */
#define ANSWER(env, rc, what, val) ((rc) < 0 ? (fail((env), (rc), (what)), 0) : (val))

JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_valueGet(JNIEnv *env, jclass cls, jlong h,
								 jint st, jint kg, jlong ns,
								 jint klen)
{
	struct jctx *j = J(h);
	struct sfs_view v;
	int rc;

	(void)cls;
	if (enter(env, j, kg))
		return 0;
	rc = sfs_value_get(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen, &v);
	jint r = rc == 1 ? out_view(j, &v) : ABSENT;
	leave(j);
	return ANSWER(env, rc, "value get", r);
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_valuePut(JNIEnv *env, jclass cls, jlong h,
								 jint st, jint kg, jlong ns,
								 jint klen, jint vlen)
{
	struct jctx *j = J(h);

	(void)cls;
	STATE_CALL(env, j, kg, "value put",
		   sfs_value_put(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen,
		   j->io + klen, (size_t)vlen));
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_valueDelete(JNIEnv *env, jclass cls,
								    jlong h, jint st, jint kg,
								    jlong ns, jint klen)
{
	struct jctx *j = J(h);

	(void)cls;
	STATE_CALL(env, j, kg, "value delete",
		   sfs_value_delete(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen));
}

/* ---- list and map state: entries out as [u32 len][bytes]... ----------------------- */

/* Collects entries into the io buffer; past its end it only counts, so
 * the caller can answer NEED(total) and be called again. */
struct fill {
	struct jctx *j;
	size_t pos;
	int with_key;	/* map: user key then value; list: value only */
};

static inline void put_blob(struct fill *f, const void *p, uint32_t n)
{
	if (f->pos + 4 + n <= f->j->cap) {
		memcpy(f->j->io + f->pos, &n, 4);
		memcpy(f->j->io + f->pos + 4, p, n);
	}
	f->pos += 4 + (size_t)n;
}

static int fill_entry(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct fill *f = arg;

	if (f->with_key)
		put_blob(f, ukey, ulen);
	put_blob(f, val, vlen);
	return 0;
}

static inline jint fill_answer(const struct fill *f)
{
	return f->pos > f->j->cap ? NEED(f->pos) : (jint)f->pos;
}

/* The entries of @key/@klen (a list's elements, or a map's user keys and
 * values) collected into the io buffer by @walk (sfs_list_get or
 * sfs_map_iter): their bytes, or NEED.  The answer overwrites the io buffer
 * the key is read from, so the key is read from the context's copy (one
 * memcpy of the key). */
typedef int (*walk_fn)(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		       sfs_entry_fn fn, void *arg);

static jint collect(JNIEnv *env, struct jctx *j, jint st, jint kg, jlong ns, jint klen,
		    walk_fn walk, int with_key, const char *what)
{
	struct fill f = { .j = j, .pos = 0, .with_key = with_key };
	int rc;

	if (enter(env, j, kg))
		return 0;
	if ((uint32_t)klen > SFS_KEY_MAX) {
		leave(j);
		return ANSWER(env, SFS_EUSAGE, "key too long", 0);
	}
	memcpy(j->key, j->io, (size_t)klen);
	rc = walk(j->c, (uint32_t)st, (uint64_t)ns, j->key, (size_t)klen, fill_entry, &f);
	leave(j);
	return ANSWER(env, rc, what, fill_answer(&f));
}

JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_listGet(JNIEnv *env, jclass cls, jlong h,
								jint st, jint kg, jlong ns,
								jint klen)
{
	(void)cls;
	return collect(env, J(h), st, kg, ns, klen, sfs_list_get, 0, "list get");
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_listAppend(JNIEnv *env, jclass cls,
								   jlong h, jint st, jint kg,
								   jlong ns, jint klen, jint total)
{
	struct jctx *j = J(h);
	size_t pos = (size_t)klen, end = (size_t)klen + (size_t)total;
	int rc = 0;

	(void)cls;
	if (enter(env, j, kg))
		return;
	/* [u32 len][bytes]... after the key: one crossing for add, addAll
	 * and update (Java clears first for update). */
	while (rc == 0 && pos + 4 <= end) {
		uint32_t n;

		memcpy(&n, j->io + pos, 4);
		if (pos + 4 + n > end) {
			rc = SFS_EUSAGE;
			break;
		}
		rc = sfs_list_append(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen,
				     j->io + pos + 4, n);
		pos += 4 + n;
	}
	leave(j);
	if (rc)
		fail(env, rc, "list append");
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_listClear(JNIEnv *env, jclass cls, jlong h,
								  jint st, jint kg, jlong ns,
								  jint klen)
{
	struct jctx *j = J(h);

	(void)cls;
	STATE_CALL(env, j, kg, "list clear",
		   sfs_list_clear(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen));
}

JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_mapGet(JNIEnv *env, jclass cls, jlong h,
							       jint st, jint kg, jlong ns,
							       jint klen, jint ulen)
{
	struct jctx *j = J(h);
	struct sfs_view v;
	int rc;

	(void)cls;
	if (enter(env, j, kg))
		return 0;
	rc = sfs_map_get(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen, j->io + klen,
			 (size_t)ulen, &v);
	jint r = rc == 1 ? out_view(j, &v) : ABSENT;
	leave(j);
	return ANSWER(env, rc, "map get", r);
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_mapPut(JNIEnv *env, jclass cls, jlong h,
							       jint st, jint kg, jlong ns,
							       jint klen, jint ulen, jint vlen)
{
	struct jctx *j = J(h);

	(void)cls;
	STATE_CALL(env, j, kg, "map put",
		   sfs_map_put(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen,
		   j->io + klen, (size_t)ulen, j->io + klen + ulen, (size_t)vlen));
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_mapRemove(JNIEnv *env, jclass cls, jlong h,
								  jint st, jint kg, jlong ns,
								  jint klen, jint ulen)
{
	struct jctx *j = J(h);

	(void)cls;
	STATE_CALL(env, j, kg, "map remove",
		   sfs_map_remove(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen,
		   j->io + klen, (size_t)ulen));
}

JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_mapIter(JNIEnv *env, jclass cls, jlong h,
								jint st, jint kg, jlong ns,
								jint klen)
{
	(void)cls;
	return collect(env, J(h), st, kg, ns, klen, sfs_map_iter, 1, "map iterate");
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_mapClear(JNIEnv *env, jclass cls, jlong h,
								 jint st, jint kg, jlong ns,
								 jint klen)
{
	struct jctx *j = J(h);

	(void)cls;
	STATE_CALL(env, j, kg, "map clear",
		   sfs_map_clear(j->c, (uint32_t)st, (uint64_t)ns, j->io, (size_t)klen));
}

/* ---- checkpoints ------------------------------------------------------------------- */

/* The task thread, at Flink's barrier: sfs's seal, O(1), no I/O. */
JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_barrier(JNIEnv *env, jclass cls, jlong h,
								jlong id)
{
	struct jctx *j = J(h);
	int rc;

	(void)cls;
	sfs_ctx_online(j->c);
	rc = sfs_barrier(j->c, (uint64_t)id);
	sfs_ctx_offline(j->c);
	if (rc)
		fail(env, rc, "seal at the barrier");
}

/* The async thread: wait for the compactor's stage of barrier @id. */
JNIEXPORT jstring JNICALL Java_io_sfs_flink_jni_SfsNative_staged(JNIEnv *env, jclass cls, jlong h,
								  jlong id, jlong timeout_ms)
{
	char dir[4096];
	int rc;

	(void)cls;
	rc = sfs_worker_staged(J(h)->c, (uint64_t)id, (uint64_t)timeout_ms * 1000000ull, dir,
			       sizeof(dir));
	if (rc) {
		fail(env, rc, "wait for the staged checkpoint");
		return NULL;
	}
	return (*env)->NewStringUTF(env, dir);
}

struct scan_arg {
	JNIEnv *env;
	jobject sink;
};

static jbyteArray bytes(JNIEnv *env, const void *p, uint32_t n)
{
	jbyteArray a;

	if (!p)
		return NULL;
	a = (*env)->NewByteArray(env, (jsize)n);
	if (a && n)
		(*env)->SetByteArrayRegion(env, a, 0, (jsize)n, p);
	return a;
}

/* One entry to Java (the snapshot's async path: arrays per entry). */
static int scan_to_java(void *arg, const struct sfs_stage_entry *e)
{
	struct scan_arg *a = arg;
	JNIEnv *env = a->env;
	jbyteArray k = bytes(env, e->key, e->klen), u = bytes(env, e->ukey, e->ulen),
		   v = bytes(env, e->val, e->vlen);

	if ((*env)->ExceptionCheck(env))
		return 1;
	(*env)->CallVoidMethod(env, a->sink, scan_entry, (jint)e->state, (jint)e->kg,
			       (jlong)e->ns, k, u, v);
	if (k)
		(*env)->DeleteLocalRef(env, k);
	if (u)
		(*env)->DeleteLocalRef(env, u);
	if (v)
		(*env)->DeleteLocalRef(env, v);
	return (*env)->ExceptionCheck(env) ? 1 : 0;
}

/* @states: NULL (this group's registry), or {id, kind, ttl_ms} triples of
 * the group that wrote the files. */
JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_scan(JNIEnv *env, jclass cls, jlong h,
							     jstring jdir, jlongArray jstates,
							     jobject sink)
{
	struct sfs_stage_state st[SFS_MAX_STATES];
	struct scan_arg a = { env, sink };
	const char *dir;
	unsigned n = 0;
	int rc;

	(void)cls;
	if (jstates) {
		jsize len = (*env)->GetArrayLength(env, jstates);
		jlong v[3 * SFS_MAX_STATES];

		if (len % 3 || len > 3 * SFS_MAX_STATES) {
			fail(env, SFS_EUSAGE, "scan: states must be {id, kind, ttl} triples");
			return;
		}
		(*env)->GetLongArrayRegion(env, jstates, 0, len, v);
		for (n = 0; n < (unsigned)len / 3; n++)
			st[n] = (struct sfs_stage_state){ .id = (uint32_t)v[3 * n],
							  .kind = (int)v[3 * n + 1],
							  .ttl_ms = (uint64_t)v[3 * n + 2] };
	}
	dir = (*env)->GetStringUTFChars(env, jdir, NULL);
	if (!dir)
		return;
	rc = sfs_stage_scan(J(h)->c, dir, jstates ? st : NULL, n, scan_to_java, &a);
	(*env)->ReleaseStringUTFChars(env, jdir, dir);
	if (rc < 0 && !(*env)->ExceptionCheck(env))
		fail(env, rc, "read the staged checkpoint");
}

JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_dropStage(JNIEnv *env, jclass cls, jlong h,
								  jstring jdir)
{
	const char *dir = (*env)->GetStringUTFChars(env, jdir, NULL);
	int rc;

	(void)cls;
	if (!dir)
		return;
	rc = sfs_stage_drop(J(h)->c, dir);
	(*env)->ReleaseStringUTFChars(env, jdir, dir);
	if (rc)
		fail(env, rc, "drop the staged checkpoint");
}

/* The JNI's contract with SfsNative.java: raised whenever a native's
 * signature or the io buffer's layout changes, and checked at load (a
 * library of another build would read its arguments wrong). */
#define SFS_JNI_ABI 5

JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_abi(JNIEnv *env, jclass cls)
{
	(void)env, (void)cls;
	return SFS_JNI_ABI;
}

JNIEXPORT jstring JNICALL Java_io_sfs_flink_jni_SfsNative_version(JNIEnv *env, jclass cls)
{
	char v[32];

	(void)cls;
	snprintf(v, sizeof(v), "%d.%d", SFS_VERSION_MAJOR, SFS_VERSION_MINOR);
	return (*env)->NewStringUTF(env, v);
}

/* ---- local recovery: back to a pinned checkpoint in place --------------------------- */

/* The task thread, once Flink completed checkpoint @id: a store and a doorbell. */
JNIEXPORT void JNICALL Java_io_sfs_flink_jni_SfsNative_pin(JNIEnv *env, jclass cls, jlong h,
							    jlong id)
{
	int rc = sfs_worker_pin(J(h)->c, (uint64_t)id);

	(void)cls;
	if (rc)
		fail(env, rc, "pin a checkpoint");
}

/* A reopened worker back to pinned checkpoint @id: NULL, or why not (the
 * caller restores from files instead: not an exception). */
JNIEXPORT jstring JNICALL Java_io_sfs_flink_jni_SfsNative_restorePinned(JNIEnv *env, jclass cls,
									 jlong h, jlong id,
									 jlong timeout_ms)
{
	struct jctx *j = J(h);
	char msg[1024];
	int rc;

	(void)cls;
	rc = sfs_worker_restore_pinned(j->c, (uint64_t)id, (uint64_t)timeout_ms * 1000000ull);
	sfs_ctx_offline(j->c);
	if (rc == 0)
		return NULL;
	snprintf(msg, sizeof(msg), "%s (%s)", sfs_last_error(), sfs_strerror(rc));
	return (*env)->NewStringUTF(env, msg);
}

/* A restore from files of the same key groups and states: the files of
 * @dir (the checkpoint's, as staged) become the worker's store
 * (sfs_worker_adopt).  NULL, or why not (the store is empty then: the
 * caller restores by writes; not an exception); a timeout throws. */
JNIEXPORT jstring JNICALL Java_io_sfs_flink_jni_SfsNative_adopt(JNIEnv *env, jclass cls, jlong h,
								 jstring dir, jlong timeout_ms)
{
	struct jctx *j = J(h);
	const char *d = (*env)->GetStringUTFChars(env, dir, NULL);
	char msg[1024];
	int rc;

	(void)cls;
	if (!d)
		return NULL; /* OutOfMemoryError pending */
	rc = sfs_worker_adopt(j->c, d, (uint64_t)timeout_ms * 1000000ull);
	(*env)->ReleaseStringUTFChars(env, dir, d);
	sfs_ctx_offline(j->c);
	if (rc == 0)
		return NULL;
	if (rc == SFS_ETIMEDOUT) { /* the store is undefined: the restore fails */
		fail(env, rc, "adopt a checkpoint's files");
		return NULL;
	}
	snprintf(msg, sizeof(msg), "%s (%s)", sfs_last_error(), sfs_strerror(rc));
	return (*env)->NewStringUTF(env, msg);
}

/* The worker slots of host group @job (sfs_group_slots). */
JNIEXPORT jint JNICALL Java_io_sfs_flink_jni_SfsNative_groupSlots(JNIEnv *env, jclass cls,
								   jstring job)
{
	const char *name = (*env)->GetStringUTFChars(env, job, NULL);
	uint32_t n = 0;
	int rc;

	(void)cls;
	if (!name)
		return 0;
	rc = sfs_group_slots(name, &n);
	(*env)->ReleaseStringUTFChars(env, job, name);
	if (rc)
		fail(env, rc, "find the host group");
	return (jint)n;
}

/* The last barrier the worker's slot sealed, in any of its openings. */
JNIEXPORT jlong JNICALL Java_io_sfs_flink_jni_SfsNative_lastBarrier(JNIEnv *env, jclass cls,
								     jlong h)
{
	(void)env, (void)cls;
	return (jlong)sfs_worker_last_barrier(J(h)->c);
}
