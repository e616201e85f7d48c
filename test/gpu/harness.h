/*
 * harness.h
 *		The host-vs-CUDA differential harness, shared by every test file of
 *		test/gpu: the two backends, checks, random numbers, pairs of stores
 *		(one per backend, same operations), their comparison, the random
 *		store differential, and the hooks by which a store kind takes part.
 *
 * A test file holds one kind's tests (test_ivf.c, test_postings.c, ...)
 * and lists them in a test_suite that harness.c runs.
 */
#ifndef GI_TEST_HARNESS_H
#define GI_TEST_HARNESS_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gi_backend.h"
#include "gi_cuda_test.h"
#include "gi_kind_ivf.h"
#include "host_store.h"

/* ---- the backends ---- */

extern const gi_backend_ops *H;		/* host reference */
extern const gi_backend_ops *C;		/* CUDA under test (the host in self mode) */
extern bool self_mode;
extern double scale;

/* the module's test hooks (NULL in self mode) */
extern gi_cuda_store_check_fn cu_check;
extern gi_cuda_store_dump_fn cu_dump;
extern gi_cuda_store_set_concurrent_fn cu_set_concurrent;
extern gi_cuda_store_set_insert_chunk_fn cu_set_chunk;
extern gi_cuda_fail_alloc_after_fn cu_fail;
extern gi_cuda_set_copy_threads_fn cu_copy_threads;	/* may be NULL */
extern gi_cuda_sparse_set_budget_fn cu_sparse_budget;	/* may be NULL */
extern gi_cuda_sparse_set_slab_order_fn cu_sparse_slab_order;	/* may be NULL */
extern gi_cuda_sparse_set_count_tiles_fn cu_sparse_count_tiles;	/* may be NULL */
extern gi_cuda_sparse_profile_fn cu_sparse_profile;	/* may be NULL */
extern gi_cuda_ivf_set_scan_fn cu_ivf_scan;	/* may be NULL */
extern gi_cuda_ivf_set_dir_shape_fn cu_ivf_dir_shape;	/* may be NULL */
extern gi_cuda_ivf_set_tiles_fn cu_ivf_tiles;	/* may be NULL */
extern gi_cuda_ivf_set_tile_chunk_fn cu_ivf_tile_chunk;	/* may be NULL */

/* ---- checks ---- */

extern int	checks_failed;		/* failures in the current test */

extern void failf(const char *file, int line, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

#define EXPECT(cond, ...) \
	do { if (!(cond)) failf(__FILE__, __LINE__, __VA_ARGS__); } while (0)

extern double now_s(void);
extern int	scaled(int n);

/* ---- random numbers (xorshift64*, state per caller) ---- */

typedef struct rng
{
	uint64_t	s;
} rng;

extern uint64_t rnext(rng *r);
extern uint32_t rbelow(rng *r, uint32_t n);
extern float rfloat(rng *r);	/* in [-1, 1) */
extern bool rchance(rng *r, double p);

/* ---- pairs of stores ---- */

typedef struct pair pair;

/*
 * What a store kind adds to the harness.  open makes the kind's state
 * for a new pair and hands it to both stores; pick_list chooses a list
 * for a new record (NULL: uniform); random_search runs one random search
 * on both stores and compares; final_search the searches at the end of a
 * random differential.  Any hook may be NULL.
 */
typedef struct test_kind
{
	const char *name;
	bool		(*open) (pair *p, rng *r);
	void		(*close) (pair *p);
	uint32_t	(*pick_list) (const pair *p, const void *payload, rng *r);
	void		(*random_search) (pair *p, rng *r, const char *when);
	void		(*final_search) (pair *p, rng *r);
} test_kind;

struct pair
{
	gi_store   *h;
	gi_store   *c;
	uint32_t	nlists;
	uint32_t	words;			/* 32-bit words per record */
	uint32_t	key_mode;
	const test_kind *kind;
	void	   *kstate;			/* the kind's own (IVF: its gi_ivf_state) */
};

typedef struct pair_cfg
{
	uint32_t	nlists;
	uint32_t	words;
	uint32_t	chunk_slabs;
	uint32_t	key_mode;
	uint64_t	memory_limit;
	gi_device  *hdev;			/* devices (NULL: the default ones) */
	gi_device  *cdev;
	const test_kind *kind;		/* may be NULL */
} pair_cfg;

extern bool pair_open(pair *p, const pair_cfg *cfg, rng *r);
extern void pair_close(pair *p);

/* both stores: same status and count required */
extern void do_insert(pair *p, uint32_t n, const uint32_t *lists, const uint64_t *keys,
					  const void *pay, const char *when);
extern void do_delete(pair *p, uint32_t n, const uint64_t *keys, const char *when);

/* statistics equal (slab counts too when slabs), except bytes */
extern void compare_stats(pair *p, bool slabs, const char *when);

/*
 * Invariants of the store under test (the module's check hook, or the
 * host's checker in self mode), then every list read back (from the
 * device) and compared record for record with the host store; with
 * GI_KEYS_PER_LIST no key twice in a list.
 */
extern void compare_contents(pair *p, const char *when);

/* ---- the random store differential ---- */

typedef struct diff_cfg
{
	pair_cfg	store;
	uint32_t	keyspace;		/* keys drawn below this (plus a few near 2^64) */
	int			ops;
	uint64_t	seed;
	uint32_t	insert_chunk;	/* records per pipelined chunk, 0 = default */
	/* records per row in an insert: 1 .. per_row (posting lists) */
	uint32_t	per_row;
} diff_cfg;

/*
 * Random inserts (duplicates, specials), deletes (unknown and repeated
 * keys), emptying, and the kind's random searches, on both stores,
 * compared after every operation; contents every 10 operations.
 */
extern void random_differential(const diff_cfg *cfg);

/* a random record of `words` floats: zero, NaN, coarse grid now and then */
extern void random_vector(rng *r, float *v, uint32_t words, bool specials);

/* ---- suites ---- */

typedef struct test_case
{
	const char *name;
	void		(*fn) (void);
	bool		oom;			/* injects device failures: skipped in self mode */
} test_case;

typedef struct test_suite
{
	const test_case *tests;
	size_t		n;
	void		(*summary) (void);	/* after the suite's tests; may be NULL */
} test_suite;

extern const test_suite store_suite;
extern const test_suite ivf_suite;
extern const test_suite postings_suite;
extern const test_suite kmeans_suite;
extern const test_suite sparse_suite;
extern const test_suite ivfpq_suite;
extern const test_suite spread_suite;

/*
 * The IVF kind of the harness (test_ivf.c), for the store tests that
 * search: the state is p->kstate (a gi_ivf_state, centroids behind it).
 */
extern const test_kind ivf_kind;

/* a pair of IVF stores with unique keys (test_ivf.c) */
extern bool ivf_pair(pair *p, uint32_t nlists, uint32_t dim, uint32_t chunk_slabs,
					 rng *r);
extern float *ivf_centroids(pair *p);
/* hand p->kstate (changed, or a store replaced) to both stores again */
extern void ivf_resend(pair *p);
extern uint32_t ivf_nearest_list(const pair *p, const float *v);
/* nq queries: fresh vectors, zero vectors, grid vectors (malloc'ed) */
extern float *ivf_random_queries(pair *p, rng *r, uint32_t nq);
/* the same search on both stores, compared query by query */
extern void ivf_compare_search(pair *p, gi_metric m, uint32_t nq, const float *queries,
							   uint32_t probes, uint32_t k, const char *when);

/*
 * Comparison of one query's hits for the kinds of IVF lists (test_ivf.c):
 * found equal, padding, distances within 1e-4 relative (dist_near), the
 * same keys up to ties at the boundary, and every device hit a live record
 * at the distance it reports by the kind's own reference (real).
 */
typedef bool (*hit_real_fn) (pair *p, gi_metric m, const float *q, uint64_t key, float d);
extern void compare_hits(pair *p, gi_metric m, const float *q, uint32_t k, const gi_hit *ha,
						 uint32_t fa, const gi_hit *hb, uint32_t fb, hit_real_fn real,
						 const char *what);
extern bool dist_near(float a, float b);

#endif							/* GI_TEST_HARNESS_H */
