/*
 * host_store.h
 *		The host (plain C) backend: slab list store plus host-only
 *		introspection used by the host search and by the unit tests.
 *
 * The store itself is reached through gi_host_backend() (gi_backend.h);
 * what follows is for code that knows it runs on the host store: the IVF
 * scan in host_ivf.c walks slabs directly, and the unit tests read lists
 * back and verify every internal invariant after random operations.
 * Nothing here includes PostgreSQL headers.
 *
 * A store is not thread-safe: its owner (the device service) serializes
 * every call on it.  Error messages are per thread.
 */
#ifndef GI_HOST_STORE_H
#define GI_HOST_STORE_H

#include "gi_backend.h"
#include "gi_kind_ivf.h"

#ifdef __cplusplus
extern "C"
{
#endif

/* pool growth step when params->chunk_slabs is 0 */
#define GI_HOST_DEFAULT_CHUNK_SLABS 1024

/*
 * A read-only view of one slab.  Pointers stay valid until the next
 * insert (which may grow, hence move, the pool) or destroy.
 */
typedef struct gi_host_slab_view
{
	uint32_t	slab;			/* slab number */
	uint32_t	next;			/* next slab of the list, or GI_NIL */
	uint32_t	list;			/* owning list, or GI_NIL when not linked */
	uint32_t	count;			/* live records */
	uint32_t	bitmap;			/* bit i set: slot i holds a live record */
	const uint32_t *rows;		/* [GI_SLAB_RECORDS] row id per slot */
	const uint64_t *keys;		/* [GI_SLAB_RECORDS] key per slot */
	const uint32_t *kids;		/* [GI_SLAB_RECORDS] key ordinal per slot */
	/* word j of slot i at payload[j * GI_SLAB_RECORDS + i] */
	const uint32_t *payload;
} gi_host_slab_view;

/* params the store was created with (chunk_slabs resolved) */
extern const gi_store_params *gi_host_store_params(const gi_store *store);

/*
 * The state a kind keeps with a store (its set_state copy): replaced by
 * the next call, freed with free_fn when replaced or when the store is
 * destroyed.
 */
extern void *gi_host_store_kind_state(const gi_store *store);
extern void gi_host_store_set_kind_state(gi_store *store, void *state,
										 void (*free_fn) (void *));

/* first (head) slab of a list, GI_NIL when empty or list out of range */
extern uint32_t gi_host_store_list_head(const gi_store *store, uint32_t list);

/* fill *view for slab; false when slab is out of range */
extern bool gi_host_store_slab(const gi_store *store, uint32_t slab,
							   gi_host_slab_view *view);

/*
 * Call cb for every live record of list, head slab first and slots in
 * ascending order inside a slab, with the payload gathered back into
 * packed form (record_bytes bytes, 4-byte aligned).  cb returns false to
 * stop early; cb may be NULL to just count.  Returns the number of records
 * visited (including the one that stopped the walk), or -1 on a bad list
 * or allocation failure (message in last_error).
 */
typedef bool (*gi_host_record_cb) (uint64_t key, uint32_t row,
								   const void *payload, void *arg);
extern int64_t gi_host_store_foreach(const gi_store *store, uint32_t list,
									 gi_host_record_cb cb, void *arg);

/*
 * Rows of key: returns how many rows the key owns (0 when absent) and
 * fills up to max entries of lists[] and rows[] (either may be NULL).
 */
extern uint32_t gi_host_store_lookup(const gi_store *store, uint64_t key,
									 uint32_t *lists, uint32_t *rows,
									 uint32_t max);

/*
 * One live row: its list, key and packed payload (any out pointer may be
 * NULL).  False when row is not live.
 */
extern bool gi_host_store_row(const gi_store *store, uint32_t row,
							  uint32_t *list, uint64_t *key, void *payload);

/*
 * Key ordinals: every live key has one in [0, gi_host_store_key_ids()),
 * the same in all the key's slots (gi_host_slab_view.kids), reused once
 * the key is deleted; kinds that score keys owning many records index
 * dense arrays by it.  gi_host_store_kid_key maps a live key's ordinal back.
 */
extern uint32_t gi_host_store_key_ids(const gi_store *store);
extern uint64_t gi_host_store_kid_key(const gi_store *store, uint32_t kid);

/*
 * Work done by inserts and deletes since the store was created: hash map
 * slots examined plus key chain rows visited.  Tests bound it to show
 * that a batch costs time proportional to its own records.
 */
extern uint64_t gi_host_store_steps(const gi_store *store);

/*
 * Verify every internal invariant (bitmaps vs counts, ATT vs slots, free
 * stacks, list links, key map vs key chains, the (key, list) pair sets vs
 * the live rows, totals).  Returns true when
 * all hold; otherwise false with a description in err.
 */
extern bool gi_host_store_check(const gi_store *store, char *err,
								size_t errlen);

/*
 * Fault injection for tests: after `after` more successful allocations the
 * store's allocator fails once (then behaves again).  Negative disables.
 * Thread-local.
 */
extern void gi_host_store_fail_alloc_after(int64_t after);

/* record the message that last_error() returns (thread-local) */
extern void gi_host_set_error(const char *fmt,...)
			__attribute__((format(printf, 1, 2)));
extern const char *gi_host_last_error(void);

/* the kinds of the host backend (host_ivf.c, host_ivfpq.c, host_sparse.c) */
extern const gi_kind_ops gi_host_ivf_kind;
extern const gi_kind_ops gi_host_ivfpq_kind;
extern const gi_kind_ops gi_host_sparse_kind;

/*
 * The host IVF search with the centroids passed in (the reference the
 * CUDA tests compare with; the kind's search calls it with its state).
 */
extern gi_status gi_host_ivf_search(gi_store *store, const float *centroids,
									uint32_t dim, gi_metric metric,
									uint32_t nq, const float *queries,
									uint32_t probes, uint32_t k,
									gi_hit *hits, uint32_t *found);

/*
 * How a kind whose lists are IVF cells scores the records of one probed
 * list (host_ivfpq.c): scan pushes every live record of `list` into best,
 * with q the query (qnorm2 its squared norm for cosine, else 0) and
 * scratch scratch_floats floats of its worker's own, zeroed at the start
 * of the search and kept from list to list (q is a pointer into the
 * search's queries, so a scorer may key what it keeps by it).
 */
struct gi_host_topk;
typedef struct gi_host_list_scorer
{
	void		(*scan) (const void *arg, gi_store *store, const float *q,
						 double qnorm2, uint32_t list, float *scratch,
						 struct gi_host_topk *best);
	const void *arg;
	size_t		scratch_floats;
} gi_host_list_scorer;

/*
 * The centroids (nlists x dim, row-major) in the layout of a slab's
 * payload, 32 centroids a block, word j of centroid i of a block at
 * [j * 32 + i], the last block padded with zeros: what the search ranks
 * the lists with.  malloc'd; NULL with the message set when out of memory.
 */
extern uint32_t *gi_host_centroid_blocks(const float *centroids, uint32_t nlists,
										 uint32_t dim);

/*
 * gi_host_ivf_search with the records of each probed list scored by
 * scorer (NULL: float vectors, as gi_host_ivf_search); the lists to probe,
 * the threads and the top-k are the same.  blocks: the centroids'
 * gi_host_centroid_blocks, kept by the caller (NULL: made for this call).
 */
extern gi_status gi_host_ivf_search_lists(gi_store *store, const float *centroids,
										  const uint32_t *blocks,
										  uint32_t dim, gi_metric metric,
										  uint32_t nq, const float *queries,
										  uint32_t probes, uint32_t k,
										  gi_hit *hits, uint32_t *found,
										  const gi_host_list_scorer *scorer);

/*
 * k-means on the host (host_kmeans.c; the algorithm is described at
 * gi_kmeans_params in gi_backend.h).  The access method trains with it in
 * the building backend; the GPU tests compare the CUDA module with it.
 *
 * gi_host_kmeans_train prepares the samples in place (spherical metrics:
 * zero vectors dropped, the rest normalised and packed at the front),
 * writes the centroids (room for params->nlists * dim floats) and returns
 * how many it produced: min(nlists, usable samples), 0 when none is
 * usable, or 0 when params->keep_going stopped it.  It allocates nothing:
 * workspace must hold gi_host_kmeans_workspace(nsamples, dim, nlists)
 * bytes.  check (may be NULL) is called regularly and may leave by longjmp.
 */
typedef void (*gi_host_kmeans_check_fn) (void *arg);
extern size_t gi_host_kmeans_workspace(uint32_t nsamples, uint32_t dim,
									   uint32_t nlists);
extern uint32_t gi_host_kmeans_train(const gi_kmeans_params *params,
									 uint32_t nsamples, float *samples,
									 float *centroids, void *workspace,
									 gi_host_kmeans_check_fn check, void *arg);

/*
 * The k-means objective of prepared samples (as gi_host_kmeans_train
 * leaves them) for k centroids, in double: the sum over samples of the
 * squared L2 distance (L2) or 1 - dot (spherical) to the nearest centroid.
 */
extern double gi_host_kmeans_objective(gi_metric metric, uint32_t dim,
									   const float *samples, uint32_t n,
									   const float *centroids, uint32_t k);

/*
 * The list the access method places a row in: the centroid nearest by the
 * metric in float (cnorms: the centroids' norms), lowest list on ties.
 */
extern uint32_t gi_host_nearest_list(const float *centroids, const float *cnorms,
									 uint32_t lists, uint32_t dim, gi_metric metric,
									 const float *vec);

/* the same for n rows, on the host backend's threads; never fails */
extern void gi_host_nearest_lists(const float *centroids, const float *cnorms,
								  uint32_t lists, uint32_t dim, gi_metric metric,
								  uint32_t n, const float *vecs, uint32_t *out);

/*
 * Reference of the kmeans_assign entry (host_ivf.c): the nearest list of
 * each vector ranked like the search's choice of lists to probe.
 */
extern gi_status gi_host_kmeans_assign(gi_device *device,
									   uint32_t nlists, uint32_t dim,
									   gi_metric metric, const float *centroids,
									   uint32_t n, const float *vectors,
									   uint32_t *lists);

#ifdef __cplusplus
}
#endif

#endif							/* GI_HOST_STORE_H */
