/*
 * gi_backend.h
 *		The compute backend interface: the mutable list store and the
 *		operations that run on it.
 *
 * Two implementations stand behind this table of functions: the host
 * backend (plain C, src/backend/host/host_*.c, the reference that CI runs) and
 * the CUDA backend (cuda/, built into gpuindex_cuda.so and dlopen'ed by the
 * device service only).  Nothing here includes PostgreSQL headers: both
 * implementations are ordinary C libraries so that they can be unit-tested
 * outside the server and so that the CUDA module never calls into
 * PostgreSQL.  Errors come back as a status code plus a message fetched
 * with last_error(); the device service turns them into ereport()s.
 *
 * The store (see DESIGN.md section 2) holds lists of fixed-size records.
 * Every record carries a 64-bit key (for index AMs: the heap TID, see
 * gi_tid_to_key) and a payload of record_bytes bytes (a multiple of 4).
 * Internally the store hands out dense row ids; the address translation
 * table (ATT) maps a row to where it lives (the host store keeps
 * slab << 32 | slot; the CUDA store packs slab * 32 + slot into 32 bits to
 * save device memory) and a hash map from key to row makes delete-by-key
 * O(1).  A key may own several rows (posting-list
 * AMs put one document in many lists); deleting a key removes all of them,
 * in time proportional to that key's own rows.
 *
 * Records inside a slab are stored word-interleaved: 32-bit word j of the
 * record in slot i lives at payload[j * GI_SLAB_RECORDS + i], so that a
 * warp whose lane i handles slot i reads each word with one coalesced
 * 128-byte transaction.  Callers always pass and receive payloads packed
 * record after record; the layout inside the store is its own business.
 */
#ifndef GI_BACKEND_H
#define GI_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* records per slab: one per warp lane, one bit each in the validity bitmap */
#define GI_SLAB_RECORDS 32

/* "no slab" / "no row" marker in links */
#define GI_NIL UINT32_MAX

typedef enum gi_status
{
	GI_OK = 0,
	GI_ERR_LIMIT,				/* would exceed the configured memory limit */
	GI_ERR_NOMEM,				/* the allocator (host or device) failed */
	GI_ERR_INVALID,				/* bad argument (list out of range, ...) */
	GI_ERR_DEVICE,				/* CUDA error: launch failure, lost device */
	GI_ERR_UNSUPPORTED,			/* this backend does not implement it */
	GI_ERR_CANCELLED			/* the caller's keep_going said stop */
} gi_status;

typedef struct gi_store gi_store;	/* opaque, one per index */
typedef struct gi_device gi_device; /* opaque, one per compute device */

/*
 * Store kinds: what a record holds and how a search scores it (see
 * docs/architecture.md, "Store kinds").  The store itself is the same for
 * every kind; a kind adds its per-store state and its search, declared in
 * its own header (gi_kind_ivf.h, gi_kind_ivfpq.h, ...) and reached through
 * gi_backend_ops.kinds[kind].
 */
typedef enum gi_kind
{
	GI_KIND_NONE = 0,
	GI_KIND_IVF = 1,			/* lists: centroids; record: a float vector */
	GI_KIND_SPARSE = 2,			/* lists: dimensions; record: a weight */
	GI_KIND_KEYWORD = 3,		/* lists: keywords; record: a count */
	GI_KIND_IVFPQ = 4,			/* lists: centroids; record: a PQ code */
	GI_KIND_COUNT
} gi_kind;

/* which records a key may own (gi_store_params.key_mode) */
typedef enum gi_key_mode
{
	GI_KEYS_ANY = 0,			/* no check: any number, duplicates kept */
	GI_KEYS_UNIQUE = 1,			/* one record: insert of a present key is
								 * skipped */
	GI_KEYS_PER_LIST = 2		/* one record per list: insert of a present
								 * (key, list) pair is skipped */
} gi_key_mode;

typedef struct gi_store_params
{
	uint32_t	nlists;			/* number of lists, >= 1 */
	uint32_t	record_bytes;	/* payload bytes per record, multiple of 4 */
	uint32_t	chunk_slabs;	/* pool growth step in slabs; 0 = default */
	uint32_t	key_mode;		/* gi_key_mode */
	uint64_t	memory_limit;	/* bytes this store may use; 0 = no limit */
	gi_device  *device;			/* where the store lives; NULL = ordinal 0 */
} gi_store_params;

typedef struct gi_store_stats
{
	uint64_t	lists;
	uint64_t	rows;			/* live records */
	uint64_t	keys;			/* distinct live keys */
	uint64_t	slabs_used;		/* slabs linked into some list */
	uint64_t	slabs_free;		/* slabs on the free stack */
	uint64_t	slabs_total;	/* slabs in the pool (used + free + never used) */
	uint64_t	bytes;			/* memory held by the store, all structures */
	uint64_t	payload_bytes;	/* rows * record_bytes: the raw data */
	uint64_t	inserts;		/* records inserted since creation */
	uint64_t	deletes;		/* records deleted since creation */
} gi_store_stats;

/* metrics understood by the search operations */
typedef enum gi_metric
{
	GI_METRIC_L2 = 0,			/* squared Euclidean distance is ranked */
	GI_METRIC_IP = 1,			/* negative inner product */
	GI_METRIC_COSINE = 2		/* 1 - cosine similarity */
} gi_metric;

/*
 * k-means for CREATE INDEX (the optional kmeans_* entries below).  The
 * algorithm is the access method's (src/am/gpuivf/gpuivf_kmeans.c, reference in
 * src/backend/host/host_kmeans.c): L2 is plain k-means on squared L2; IP and
 * cosine are spherical k-means (zero samples dropped, samples normalised,
 * similarity the dot product, every centroid the normalised mean of its
 * members).  k-means++ seeding (D^2 sampling) with the PRNG of
 * gi_kmeans.h seeded with `seed`, then at most `iterations` Lloyd
 * iterations, stopping early when no assignment changes; an empty cluster
 * keeps its previous centroid.  min(nlists, usable samples) centroids are
 * produced.
 */
typedef struct gi_kmeans_params
{
	uint32_t	dim;
	uint32_t	nlists;			/* centroids wanted, >= 1 */
	uint32_t	iterations;		/* Lloyd iterations at most */
	uint32_t	metric;			/* gi_metric */
	uint64_t	seed;
	gi_device  *device;			/* where to train; NULL = ordinal 0 */

	/*
	 * NULL, or asked between groups of k-means++ picks and between Lloyd
	 * iterations whether to go on: on false the training stops, and
	 * kmeans_train returns GI_ERR_CANCELLED.
	 */
	bool		(*keep_going) (void *arg);
	void	   *keep_going_arg;
} gi_kmeans_params;

/* one search hit: key of the record and its distance */
typedef struct gi_hit
{
	uint64_t	key;
	float		distance;
	uint32_t	pad;
} gi_hit;

/*
 * The position of the first value of v[0..n) that is NaN or infinite, or
 * n when all are finite (x - x is 0 exactly for a finite x).  A kind's
 * set_state refuses state with such values: comparisons with NaN would
 * rank lists differently on each backend.
 */
static inline size_t
gi_first_nonfinite(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(v[i] - v[i] == 0.0f))
			return i;
	return n;
}

/*
 * The order of every answer: ascending distance, NaN after every number,
 * then ascending key.  Negative, zero or positive as x comes before, with
 * or after y.
 */
static inline int
gi_hit_order(const gi_hit *x, const gi_hit *y)
{
	bool		xnan = x->distance != x->distance;
	bool		ynan = y->distance != y->distance;

	if (xnan != ynan)
		return xnan ? 1 : -1;
	if (!xnan && x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/*
 * What a kind adds to the store (the kind's header documents the layouts
 * of its state, search parameters and queries).
 */
/* one stage of a search as the compute backend timed it */
typedef struct gi_stage_time
{
	char		name[16];
	float		us;
} gi_stage_time;

#define GI_MAX_STAGES 8

typedef struct gi_kind_ops
{
	/*
	 * Hand the store its constant per-store state (IVF: the centroids).
	 * Called once after store_create, before the first search; the backend
	 * copies what it needs (to the device, once).  May be NULL when the
	 * kind has no state.
	 */
	gi_status	(*set_state) (gi_store *store, const void *state, size_t bytes);

	/*
	 * Search: nq queries packed back to back in the kind's query layout
	 * (query_bytes in all), the kind's parameters in params.  For each
	 * query the k best records go to hits[q * k ...] in ascending
	 * (distance, key) order; slots beyond the records found get key 0 and
	 * distance +Inf and found[q] tells how many are real.
	 */
	gi_status	(*search) (gi_store *store, const void *params,
						   uint32_t nq, const void *queries, size_t query_bytes,
						   uint32_t k, gi_hit *hits, uint32_t *found);

	/*
	 * Optional: told of the records store_insert was given (the same arrays,
	 * also when it failed part way: those before the failure stay), so
	 * that the kind can keep a bound per list.
	 */
	void		(*inserted) (gi_store *store, uint32_t n, const uint32_t *lists,
							 const void *payloads);

	/*
	 * Optional: the kind's per-list bound (its header says what it bounds)
	 * for lists [first, first + n) into out[n].
	 */
	gi_status	(*list_bounds) (gi_store *store, uint32_t first, uint32_t n,
								float *out);

	/*
	 * Optional: time the stages of the next search (copies, kernels) when
	 * on, and say what they took: at most max stages of the last search
	 * timed into out, their number returned (0 when none was timed).
	 */
	void		(*time_stages) (gi_store *store, bool on);
	uint32_t	(*last_stages) (gi_store *store, gi_stage_time *out, uint32_t max);

	/*
	 * Optional: search in two halves, so that the caller can do other work
	 * while the device searches.  search_start takes search's arguments,
	 * reads params and queries, and queues the work (it may also do all of
	 * it); search_finish waits
	 * for it, fills the hits and found given to search_start (the caller's
	 * until then) and returns the search's status.  After a search_start
	 * that returned GI_OK, search_finish comes before any other call on
	 * the store but search_done; after one that failed, nothing is
	 * pending.  search_done says, without waiting, whether search_finish
	 * would return at once.
	 */
	gi_status	(*search_start) (gi_store *store, const void *params,
								 uint32_t nq, const void *queries, size_t query_bytes,
								 uint32_t k, gi_hit *hits, uint32_t *found);
	bool		(*search_done) (gi_store *store);
	gi_status	(*search_finish) (gi_store *store);
} gi_kind_ops;

typedef struct gi_backend_ops
{
	const char *name;			/* "cpu" or "cuda" */

	/* message for the last non-OK status returned in this thread */
	const char *(*last_error) (void);

	/*
	 * Devices.  device_count() says how many are usable (the host backend
	 * answers 1); device_open() makes the object of one of them, with
	 * whatever it keeps per device (context, streams, library handles,
	 * k-means scratch); stores are created on one device and live there.
	 * Objects of different devices are independent; one device's calls
	 * are serialized by the caller.
	 */
	int			(*device_count) (void);
	gi_status	(*device_open) (int ordinal, gi_device **out);
	void		(*device_close) (gi_device *device);

	/* human readable description, e.g. "NVIDIA H100 80GB HBM3" */
	const char *(*device_name) (gi_device *device);

	gi_status	(*store_create) (const gi_store_params *params, gi_store **out);
	void		(*store_destroy) (gi_store *store);

	/*
	 * Insert n records: record i goes to list lists[i] with key keys[i] and
	 * payload payloads + i * record_bytes.  Records the key mode forbids
	 * (a present key; a present key and list pair) are skipped, and so is
	 * the second of two such records in one call.  *ninserted (may be
	 * NULL) receives the number really inserted.  On error nothing or a
	 * prefix is inserted; the store stays consistent either way.
	 */
	gi_status	(*store_insert) (gi_store *store, uint32_t n,
								 const uint32_t *lists, const uint64_t *keys,
								 const void *payloads, uint64_t *ninserted);

	/*
	 * Delete every record of each key in keys[0..n-1], in time
	 * proportional to the records those keys own.  Unknown keys and
	 * repeated keys are ignored (delete is idempotent).  *ndeleted (may be
	 * NULL) receives the number of records removed.
	 */
	gi_status	(*store_delete) (gi_store *store, uint32_t n,
								 const uint64_t *keys, uint64_t *ndeleted);

	gi_status	(*store_stats) (gi_store *store, gi_store_stats *out);

	/*
	 * Change the store's memory limit (0 = none).  The device service
	 * shares gpuindex.memory_limit among all stores and hands each store
	 * what the others leave before every mutation batch.  May be NULL.
	 */
	void		(*store_set_limit) (gi_store *store, uint64_t memory_limit);

	/* the kinds this backend searches; NULL where it has no such kind */
	const gi_kind_ops *kinds[GI_KIND_COUNT];

	/*
	 * Optional k-means for CREATE INDEX (NULL: not supported; the access
	 * method then trains and assigns in the backend process, as it always
	 * does with the host backend, so that builds run in parallel).
	 *
	 * kmeans_train: train on n samples (n * params->dim floats, row-major,
	 * not modified) on params->device as described at gi_kmeans_params;
	 * writes *nproduced centroids (0 when no sample is usable) to centroids
	 * (room for params->nlists * dim floats).  Deterministic: the same
	 * samples and params give the same centroids on the same device.
	 *
	 * kmeans_assign: for each of n vectors the nearest of nlists centroids,
	 * ranked exactly as the IVF search ranks lists to probe: by (double
	 * centroid distance under `metric`, list number), the distance being
	 * the host's (host_ivf.c: double sums in dimension order; cosine +Inf
	 * for a zero norm; NaN ranks as +Inf).
	 *
	 * kmeans_release: free whatever the two keep cached on the device
	 * between calls (device copies of centroids, scratch); called when no
	 * build needs them any more.  May be NULL.
	 */
	gi_status	(*kmeans_train) (const gi_kmeans_params *params, uint32_t n,
								 const float *samples, float *centroids,
								 uint32_t *nproduced);
	gi_status	(*kmeans_assign) (gi_device *device, uint32_t nlists, uint32_t dim,
								  gi_metric metric, const float *centroids,
								  uint32_t n, const float *vectors,
								  uint32_t *lists);
	void		(*kmeans_release) (gi_device *device);

	/*
	 * Optional: how many CPU threads this process's calls of the backend
	 * may use for their host-side work, the calling thread included (0:
	 * one per online CPU, up to the backend's own cap; 1: the calling
	 * thread alone).  Takes effect at the next call; results never depend
	 * on it.  The host backend runs its searches and k-means on them.  May
	 * be NULL.
	 */
	void		(*set_host_threads) (uint32_t n);
} gi_backend_ops;

/* the host backend, always present */
extern const gi_backend_ops *gi_host_backend(void);

/* the symbol gpuindex_cuda.so exports; returns NULL when unusable */
typedef const gi_backend_ops *(*gi_backend_entry_fn) (void);
#define GI_CUDA_ENTRY_SYMBOL "gi_cuda_backend"

/* heap TIDs as store keys: block number in the high bits, offset low */
static inline uint64_t
gi_tid_to_key(uint32_t block, uint16_t offset)
{
	return ((uint64_t) block << 16) | offset;
}

static inline uint32_t
gi_key_block(uint64_t key)
{
	return (uint32_t) (key >> 16);
}

static inline uint16_t
gi_key_offset(uint64_t key)
{
	return (uint16_t) (key & 0xFFFF);
}

#ifdef __cplusplus
}
#endif

#endif							/* GI_BACKEND_H */
