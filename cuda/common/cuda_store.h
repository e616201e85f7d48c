/*
 * cuda_store.h
 *		The CUDA store: what lives on the device, what the host side of the
 *		backend keeps, and the internal entry points of the cuda/ files.
 *
 * Division of labour (cuda/README.md, "What lives where"):
 *
 *	- The device holds everything a search reads and everything SIVF puts
 *	  on the device: list heads and row counts, the slab headers (next,
 *	  prev, list, count, validity bitmap, and a pointer to the slab's data
 *	  block), the slab data blocks (word-interleaved payload, then the 32
 *	  keys), the ATT (row -> slab * 32 + slot, 32 bits) and the free-slab
 *	  stack.  Kernels publish inserts with payload, fence, then the
 *	  validity bit; deletes find a row through the device ATT and clear
 *	  its bit atomically.
 *
 *	- The host side keeps the key -> rows map (the brief allows it: the
 *	  service calls a store from one thread) and a mirror of the slab
 *	  metadata (headers without payload, ATT, free stacks).  Each batch is
 *	  planned on the host in O(1) per record with exactly the host
 *	  store's rules (head slab's first free slot, else a free slab, else
 *	  growth by a chunk), then applied on the device by a few kernels.
 *	  Planning on the host makes the slab accounting deterministic and
 *	  identical to the reference, so statistics and memory-limit errors
 *	  agree with the host backend exactly, and a batch that hits the limit
 *	  is cut at the same record.  The planning code (cuda_plan.cu,
 *	  cuda_keymap.cu) makes no CUDA call, so bench/store/plan_bench times
 *	  it on any machine.
 *
 * Slab data blocks come from chunks: one cudaMalloc per pool growth, never
 * moved, so the payload is never copied when the pool grows.  Per-slab
 * and per-row metadata (headers, ATT, free stack) are small and are
 * reallocated (device-to-device copy) on growth.
 */
#ifndef GI_CUDA_STORE_H
#define GI_CUDA_STORE_H

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <mutex>

#include <cuda_runtime.h>

#include "gi_backend.h"

/* device slab header: one 32-byte sector holds all a reader needs */
struct gi_dslab
{
	uint32_t	next;			/* next slab of the list, GI_NIL at the end */
	uint32_t	prev;
	uint32_t	list;			/* GI_NIL when not linked */
	uint32_t	count;			/* live records */
	uint32_t	bitmap;			/* validity: the only thing readers trust */
	uint32_t	pad;
	uint32_t   *data;			/* payload[32*W] | keys[32] (u64) | rows[32] */
};

/* host mirror of a slab header */
struct gi_mslab
{
	uint32_t	next;
	uint32_t	prev;
	uint32_t	list;
	uint32_t	count;
	uint32_t	bitmap;
	uint32_t	held;			/* deleted slots not reusable yet (concurrent mode) */
};

/* one 32-bit store applied by the patch kernel: final values, no order */
struct gi_cu_patch
{
	uint32_t   *addr;
	uint32_t	value;
	uint32_t	pad;
};

/* ATT entries and planned places: slab * 32 + slot in 32 bits */
#define GI_CU_LOC(slab, slot) (((uint32_t) (slab) << 5) | (uint32_t) (slot))
#define GI_CU_LOC_SLAB(loc) ((uint32_t) (loc) >> 5)
#define GI_CU_LOC_SLOT(loc) ((uint32_t) (loc) & 31u)
/* ATT value of a row that is not live */
#define GI_CU_ATT_NONE UINT32_MAX

/* one planned insert */
struct gi_cu_plan
{
	uint64_t	key;
	uint32_t	src;			/* record index inside the uploaded chunk */
	uint32_t	loc;			/* slab * 32 + slot */
	uint32_t	row;
	uint32_t	pad;
};

/* one key map entry: row1 = first row of the key + 1, 0 = empty */
struct gi_cu_mapent
{
	uint64_t	key;
	uint32_t	row1;
	uint32_t	pad;
};

/*
 * Phase times of the mutations (nanoseconds, accumulated until reset by
 * the gi_cuda_store_profile hook): where a batch's wall time goes.
 */
struct gi_cu_prof
{
	uint64_t	plan_ns;		/* insert planning on the mirror */
	uint64_t	copy_ns;		/* payload into the pinned arena, not hidden by planning */
	uint64_t	ship_ns;		/* patch collection, async copies, launches */
	uint64_t	wait_ns;		/* waiting for the device (arena reuse, final sync) */
	uint64_t	grow_ns;		/* pool growth (device allocations included) */
	uint64_t	grow_dev_ns;	/* pool growth: its device part alone */
	uint64_t	map_ns;			/* key map resizes */
	uint64_t	del_plan_ns;	/* delete: map and mirror */
	uint64_t	del_dev_ns;		/* delete: upload, kernels, read-back */
	uint64_t	ngrow;
	uint64_t	nmap;
	uint64_t	nchunks;
};

/* grow-only device scratch buffer */
struct gi_cu_buf
{
	void	   *p;
	size_t		cap;
};

/* grow-only pinned (page-locked) host buffer: asynchronous copies */
struct gi_cu_pinned
{
	void	   *p;
	size_t		cap;
};

/* grow-only host array */
struct gi_cu_hbuf
{
	void	   *p;
	size_t		cap;
};

/* error flags the kernels raise (bit mask in d_flags[0]) */
#define GI_CU_FLAG_CHAIN	1u		/* a slab chain was longer than the pool */
#define GI_CU_FLAG_ATT		2u		/* delete found a row with no ATT entry */
#define GI_CU_FLAG_OVERFLOW 4u		/* more candidates than counted (retry) */

struct gi_store
{
	gi_store_params params;
	uint32_t	words;			/* record_bytes / 4 */
	size_t		slab_bytes;		/* one slab's data block */
	bool		broken;			/* a device error left the device behind the mirror */
	bool		concurrent;		/* searches may overlap mutations (tests) */

	/* guards device pointers against a concurrent search (pool growth) */
	std::mutex	mu;

	/* ---- host mirror ---- */
	uint32_t   *list_head;		/* [nlists] */
	uint32_t   *list_rows;		/* [nlists] live records per list */
	uint8_t    *list_dirty;		/* [nlists] */
	uint32_t   *dirty_lists;	/* [nlists] */
	uint32_t	ndirty_lists;

	uint32_t	nslabs;			/* pool capacity */
	uint32_t	slab_hwm;		/* slabs >= hwm never used */
	gi_mslab   *slabs;			/* [nslabs] */
	uint8_t    *slab_dirty;		/* [nslabs] links changed since last apply */
	uint32_t   *dirty_slabs;	/* [nslabs] */
	uint32_t	ndirty_slabs;
	uint32_t   *free_slabs;		/* [nslabs] stack */
	uint32_t	nfree;
	uint32_t	free_low;		/* lowest top since the device copy was synced */
	uint32_t   *pending;		/* [nslabs] freed while searches may run */
	uint32_t	npending;
	uint32_t   *held_slabs;		/* [nslabs] slabs with held bits */
	uint32_t	nheld;

	/* mapped bytes of the nine per-slab / per-slot mirror arrays (mremap) */
	size_t		mirror_bytes[9];

	uint32_t	row_hwm;
	uint32_t   *att;			/* [nslabs*32] row -> slab * 32 + slot */
	uint32_t   *row_next;		/* [nslabs*32] next row of the same key */
	uint32_t   *free_rows;		/* [nslabs*32] stack */
	uint32_t	nfree_rows;

	/* key -> first row: open addressing, one 16-byte entry per slot */
	uint64_t	map_cap;
	uint64_t	map_count;
	gi_cu_mapent *map;
	size_t		map_bytes;		/* mapping size (huge-page backed) */

	uint64_t	rows;
	uint64_t	slabs_used;
	uint64_t	inserts;
	uint64_t	deletes;

	/* ---- device ---- */
	uint32_t   *d_lists;		/* [2*nlists]: head, rows */
	gi_dslab   *d_slabs;		/* [nslabs] */
	uint32_t   *d_att;			/* [nslabs*32] row -> slab * 32 + slot */
	uint32_t   *d_free;			/* [nslabs] */
	void	  **chunks;			/* data blocks, one per growth */
	uint32_t	nchunks;
	uint32_t	chunks_cap;
	uint32_t   *d_flags;		/* [4] error flags, see GI_CU_FLAG_* */
	cudaStream_t ms;			/* mutations */
	cudaStream_t ss;			/* searches */
	cudaEvent_t ev_grow;		/* pool growth's copies done (searches wait) */

	/* device time of the last mutation (benchmarks; off by default) */
	bool		timing;
	cudaEvent_t ev0;
	cudaEvent_t ev1;
	double		dev_ms;

	/*
	 * Insert pipeline: two upload arenas (payload, plan, patches of one
	 * chunk), pinned on the host and mirrored on the device, so that the
	 * host plans chunk c+1 while chunk c is copied and applied.
	 */
	uint32_t	insert_chunk;	/* records per chunk (0: from record size) */
	gi_cu_plan *plan_dst;		/* where planning writes (an arena) */
	gi_cu_pinned p_up[2];
	gi_cu_buf	m_up[2];
	cudaEvent_t ev_up[2];		/* arena b free again */
	cudaEvent_t ev_t0[2];		/* timing: chunk in arena b started */
	bool		up_busy[2];

	gi_cu_prof	prof;

	/* mutation scratch */
	gi_cu_buf	m_patch;
	gi_cu_hbuf	h_patch;
	gi_cu_hbuf	h_rows;
	uint32_t	nplan;
	uint32_t	npatch;
	uint32_t	nrows_del;

	/* centroid cache (searches) */
	float	   *h_cent;			/* host copy to detect a change */
	uint32_t	cent_dim;
	bool		cent_valid;
	float	   *d_cent;			/* [nlists*dim] */
	double	   *d_centd;		/* [nlists*dim] as doubles, for the DGEMM */
	double	   *d_cnorm;		/* [nlists] |c|^2 summed like the host does */

	/* search scratch */
	gi_cu_buf	s_q;			/* queries (float) */
	gi_cu_buf	s_qd;			/* queries (double) */
	gi_cu_buf	s_qn;			/* |q|^2 float */
	gi_cu_buf	s_qnd;			/* |q|^2 double, host order */
	gi_cu_buf	s_gemm;			/* nlists x qc doubles -> ordered keys */
	gi_cu_buf	s_cand;			/* qc x P' candidate lists */
	gi_cu_buf	s_rkey;			/* qc x P' refined keys */
	gi_cu_buf	s_probe;		/* qc x P probed lists */
	gi_cu_buf	s_hits;			/* qc x k gi_hit */
	gi_cu_buf	s_found;		/* qc */
	gi_cu_buf	s_cd;			/* partial results: distances */
	gi_cu_buf	s_ck;			/* partial results: keys */
	gi_cu_buf	s_cn;			/* partial results: counts */
	gi_cu_buf	s_cnt;			/* general path: candidates per query */
	gi_cu_buf	s_beg;
	gi_cu_buf	s_cur;
	gi_cu_buf	s_gd0;
	gi_cu_buf	s_gk0;
	gi_cu_buf	s_gd1;
	gi_cu_buf	s_gk1;
	gi_cu_buf	s_tmp;			/* CUB temporary storage */
	gi_cu_buf	s_okey;			/* list-ordered units: keys, sorted keys, */
	gi_cu_buf	s_okey2;		/* unit ids, and the order */
	gi_cu_buf	s_oval;
	gi_cu_buf	s_order;
	gi_cu_buf	s_seg;			/* multi-query tiles: first unit of each list, */
	gi_cu_buf	s_tflag;		/* tile-start flags, tile starts and count */
	gi_cu_buf	s_tile;
	gi_cu_hbuf	h_cnt;
	gi_cu_hbuf	h_beg;
	gi_cu_pinned p_q;			/* queries on their way up */
	gi_cu_pinned p_res;			/* hits, found, flags on their way down */
};

/* ---- cuda_store.cu (device side of the life cycle) ---- */
extern gi_status gi_cu_store_create(const gi_store_params *params, gi_store **out);
extern void gi_cu_store_destroy(gi_store *s);
extern gi_status gi_cu_store_stats(gi_store *s, gi_store_stats *out);
extern void gi_cu_store_set_limit(gi_store *s, uint64_t limit);
extern uint64_t gi_cu_device_bytes(const gi_store *s);
extern gi_status gi_cu_grow_pool(gi_store *s);
extern gi_status gi_cu_buf_reserve(gi_cu_buf *b, size_t bytes);
extern void gi_cu_buf_free(gi_cu_buf *b);
extern gi_status gi_cu_pinned_reserve(gi_cu_pinned *b, size_t bytes);
extern void gi_cu_pinned_free(gi_cu_pinned *b);
extern gi_status gi_cu_check_usable(gi_store *s);
extern gi_status gi_cu_broken(gi_store *s, gi_status st);
extern gi_status gi_cu_collect_patches(gi_store *s, uint32_t *nfirst);
extern void gi_cu_launch_patches(gi_store *s, const gi_cu_patch *d, uint32_t nfirst,
								 uint32_t total);
extern gi_status gi_cu_apply_patches(gi_store *s, uint32_t from, uint32_t to);
extern gi_status gi_cu_quiesce(gi_store *s);
extern gi_status gi_cu_mutation_begin(gi_store *s);
extern gi_status gi_cu_read_flags(gi_store *s, cudaStream_t st, uint32_t idx,
								  uint32_t *flags);
extern int	gi_cu_sm_count(void);
extern void gi_cu_time_begin(gi_store *s);
extern void gi_cu_time_end(gi_store *s);

/* ---- cuda_plan.cu: host side of the mutations (no CUDA calls) ---- */
extern uint64_t gi_cu_bytes_for(const gi_store *s, uint64_t nslabs, uint64_t map_cap);
extern gi_status gi_cu_limit_error(const gi_store *s, uint64_t need);
extern bool gi_cu_hbuf_reserve(gi_cu_hbuf *b, size_t bytes);
extern bool gi_cu_grow_mirror(gi_store *s, uint64_t want);
extern void gi_cu_init_mirror(gi_store *s, uint64_t old, uint64_t want);
extern void gi_cu_free_mirror(gi_store *s);
extern uint64_t gi_cu_patch_bound(const gi_store *s);
extern uint32_t gi_cu_collect_patches_into(gi_store *s, gi_cu_patch *p, uint32_t *nfirst);
extern gi_status gi_cu_plan_insert(gi_store *s, const uint32_t *lists, const uint64_t *keys,
								   uint32_t from, uint32_t to, gi_cu_plan *plan,
								   uint32_t *nplan, uint64_t *done);
extern gi_status gi_cu_plan_delete(gi_store *s, uint32_t n, const uint64_t *keys,
								   uint64_t *done);
extern void gi_cu_copy_begin(void *dst, const void *src, size_t bytes);
extern void gi_cu_copy_end(void);
extern void gi_cu_copy_set_threads(int n);
extern void gi_cu_map_rehash(const gi_cu_mapent *old, uint64_t oldcap, uint64_t count,
							 gi_cu_mapent *m, uint64_t cap);
extern int	gi_cu_copy_threads(void);

static inline uint64_t
gi_cu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static inline void
gi_cu_mark_slab(gi_store *s, uint32_t slab)
{
	if (!s->slab_dirty[slab])
	{
		s->slab_dirty[slab] = 1;
		s->dirty_slabs[s->ndirty_slabs++] = slab;
	}
}

static inline void
gi_cu_mark_list(gi_store *s, uint32_t list)
{
	if (!s->list_dirty[list])
	{
		s->list_dirty[list] = 1;
		s->dirty_lists[s->ndirty_lists++] = list;
	}
}

/* ---- cuda_keymap.cu: key -> first row (host side) ---- */
#define GI_CU_MAP_NONE UINT64_MAX
#define GI_CU_MAP_INITIAL 64

/* the murmur3 finalizer, as the host store hashes */
static inline uint64_t
gi_cu_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64_C(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return k;
}

static inline uint64_t
gi_cu_map_find(const gi_store *s, uint64_t key)
{
	uint64_t	mask = s->map_cap - 1;
	uint64_t	i = gi_cu_hash(key) & mask;
	const gi_cu_mapent *m = s->map;

	while (m[i].row1 != 0)
	{
		if (m[i].key == key)
			return i;
		i = (i + 1) & mask;
	}
	return GI_CU_MAP_NONE;
}

/* one random map slot per record: loops prefetch a few records ahead */
static inline void
gi_cu_map_prefetch(const gi_store *s, uint64_t key)
{
	__builtin_prefetch(&s->map[gi_cu_hash(key) & (s->map_cap - 1)]);
}

static inline bool
gi_cu_map_has_room(const gi_store *s)
{
	return (s->map_count + 1) * 3 <= s->map_cap * 2;
}

extern void gi_cu_map_put(gi_cu_mapent *m, uint64_t cap, uint64_t key, uint32_t row);
extern void gi_cu_map_remove(gi_store *s, uint64_t i);
extern gi_status gi_cu_map_resize(gi_store *s, uint64_t newcap);
extern gi_status gi_cu_map_reserve(gi_store *s, uint64_t keys);
extern void gi_cu_map_free(gi_store *s);

/* ---- cuda_insert.cu / cuda_delete.cu ---- */
extern gi_status gi_cu_store_insert(gi_store *s, uint32_t n, const uint32_t *lists,
									const uint64_t *keys, const void *payloads,
									uint64_t *ninserted);
extern gi_status gi_cu_store_delete(gi_store *s, uint32_t n, const uint64_t *keys,
									uint64_t *ndeleted);

/* ---- cuda_search.cu ---- */
extern gi_status gi_cu_ivf_search(gi_store *s, const float *centroids, uint32_t dim,
								  gi_metric metric, uint32_t nq, const float *queries,
								  uint32_t probes, uint32_t k, gi_hit *hits,
								  uint32_t *found);

/* ---- cuda_quantizer.cu: choose the probed lists of a chunk of queries ---- */
extern gi_status gi_cu_coarse(gi_store *s, gi_metric metric, uint32_t qc,
							  uint32_t probes, const uint32_t **probe_lists);
extern gi_status gi_cu_centroids(gi_store *s, const float *centroids, uint32_t dim);

/* the module's one cuBLAS handle (created on first use; set its stream per call) */
typedef struct cublasContext *cublasHandle_t;
extern gi_status gi_cu_cublas_handle(cublasHandle_t *out);

/* ---- cuda_kmeans.cu: k-means for CREATE INDEX (gi_backend.h kmeans_*) ---- */
extern gi_status gi_cu_kmeans_train(const gi_kmeans_params *params, uint32_t n,
									const float *samples, float *centroids,
									uint32_t *nproduced);
extern gi_status gi_cu_kmeans_assign(uint32_t nlists, uint32_t dim, gi_metric metric,
									 const float *centroids, uint32_t n,
									 const float *vectors, uint32_t *lists);
extern void gi_cu_kmeans_release(void);

#endif							/* GI_CUDA_STORE_H */
