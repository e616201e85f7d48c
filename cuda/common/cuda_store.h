/*
 * cuda_store.h
 *		The CUDA store, the same for every kind: what lives on its device
 *		(list heads, slab headers and data blocks, ATT, free stack), the
 *		host side (key map, pair sets, mirror of the slab metadata, upload
 *		arenas), the kind's state hook, and the internal entry points of
 *		cuda/common.  Why it is split so: cuda/README.md, "What lives where".
 */
#ifndef GI_CUDA_STORE_H
#define GI_CUDA_STORE_H

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <mutex>

#include <cuda_runtime.h>

#include "gi_backend.h"
#include "gi_pairset.h"
#include "cuda_device.h"

/* device slab header: one 32-byte sector holds all a reader needs */
struct gi_dslab
{
	uint32_t	next;			/* next slab of the list, GI_NIL at the end */
	uint32_t	prev;
	uint32_t	list;			/* GI_NIL when not linked */
	uint32_t	count;			/* live records */
	uint32_t	bitmap;			/* validity: the only thing readers trust */
	uint32_t	pad;
	uint32_t   *data;			/* payload[32*W] | keys[32] (u64) | kids[32] (u32) */
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
	uint32_t	kid;			/* the key's ordinal */
};

/* one key map entry: row1 = first row of the key + 1, 0 = empty */
struct gi_cu_mapent
{
	uint64_t	key;
	uint32_t	row1;
	uint32_t	kid;			/* the key's ordinal */
};

/*
 * Key ordinals: every live key has one in [0, kid_hwm), stored in each of
 * its slots on the device and in its key map entry, mapped back to the key
 * by d_kid_key; freed when the key is deleted and reused last-in first-out
 * (as the host store does).  Live keys never exceed 2/3 of the key map's
 * capacity, so the ordinal arrays are sized from it and grow with it.
 */
static inline uint64_t
gi_cu_kid_cap(uint64_t map_cap)
{
	return map_cap * 2 / 3 + 1;
}


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
#define GI_CU_FLAG_DIR		8u		/* a linked slab names a list out of range */

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
	uint64_t	gen;			/* mutation calls so far (search caches) */

	/* key ordinals: free stack, and those held back in concurrent mode */
	uint32_t	kid_hwm;		/* ordinals >= kid_hwm have never been used */
	uint32_t	nfree_kids;
	uint32_t	nheld_kids;
	uint64_t	kid_cap;		/* room in free_kids and held_kids */
	uint32_t   *free_kids;
	uint32_t   *held_kids;

	/* ---- device ---- */
	uint32_t   *d_lists;		/* [2*nlists]: head, rows */
	gi_dslab   *d_slabs;		/* [nslabs] */
	uint32_t   *d_att;			/* [nslabs*32] row -> slab * 32 + slot */
	uint32_t   *d_free;			/* [nslabs] */
	uint64_t   *d_kid_key;		/* [d_kid_cap] ordinal -> key */
	uint64_t	d_kid_cap;
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

	gi_device  *dev;			/* where it lives (params.device resolved) */

	/*
	 * Device side of a key map growth: d_kid_key to gi_cu_kid_cap(map_cap)
	 * entries (gi_cu_grow_kids); NULL where there is no device (the
	 * planning benchmark).
	 */
	gi_status	(*grow_kids) (gi_store *s, uint64_t map_cap);

	/* the pairs of GI_KEYS_PER_LIST's check (gi_pairset.h; unused otherwise) */
	gi_pairs	pairs;

	/*
	 * What the store's kind keeps (its set_state, its search scratch):
	 * owned by the kind's files (cuda/<kind>/), freed by kstate_free when
	 * replaced or when the store is destroyed.
	 */
	uint32_t	kind;			/* gi_kind of kstate; GI_KIND_NONE without */
	void	   *kstate;
	void		(*kstate_free) (gi_store *s, void *kstate);
};

/* ---- cuda_store.cu (device side of the life cycle) ---- */
extern gi_status gi_cu_store_create(const gi_store_params *params, gi_store **out);
extern void gi_cu_store_destroy(gi_store *s);
extern gi_status gi_cu_store_stats(gi_store *s, gi_store_stats *out);
extern void gi_cu_store_set_limit(gi_store *s, uint64_t limit);
extern uint64_t gi_cu_device_bytes(const gi_store *s);
extern gi_status gi_cu_grow_pool(gi_store *s);
extern gi_status gi_cu_grow_kids(gi_store *s, uint64_t map_cap);
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
extern void gi_cu_time_begin(gi_store *s);
extern void gi_cu_time_end(gi_store *s);

/* ---- cuda_plan.cu: host side of the mutations (no CUDA calls) ---- */
extern uint64_t gi_cu_bytes_for(const gi_store *s, uint64_t nslabs, uint64_t map_cap);
extern gi_status gi_cu_limit_error(const gi_store *s, uint64_t need);
/* the list of a live row in the mirror (gi_pairs_list_fn) */
extern uint32_t gi_cu_row_list(const void *store, uint32_t row);
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

extern void gi_cu_map_put(gi_cu_mapent *m, uint64_t cap, uint64_t key, uint32_t row,
						  uint32_t kid);
extern void gi_cu_map_remove(gi_store *s, uint64_t i);
extern gi_status gi_cu_map_resize(gi_store *s, uint64_t newcap);
extern gi_status gi_cu_map_reserve(gi_store *s, uint64_t keys);
extern uint64_t gi_cu_batch_keys(const gi_store *s, const uint64_t *keys, uint32_t n);
extern void gi_cu_map_free(gi_store *s);
/* the key map at its first size, and no pairs */
extern gi_status gi_cu_maps_init(gi_store *s);

/* ---- cuda_insert.cu / cuda_delete.cu ---- */
extern gi_status gi_cu_store_insert(gi_store *s, uint32_t n, const uint32_t *lists,
									const uint64_t *keys, const void *payloads,
									uint64_t *ninserted);
extern gi_status gi_cu_store_delete(gi_store *s, uint32_t n, const uint64_t *keys,
									uint64_t *ndeleted);

/* ---- the kind's state hung off a store ---- */

/*
 * The state of kind `kind` (NULL when the store has none or another
 * kind's); gi_cu_set_kstate frees the previous one and installs a new one.
 */
static inline void *
gi_cu_kstate(const gi_store *s, uint32_t kind)
{
	return s->kind == kind ? s->kstate : NULL;
}

extern void gi_cu_set_kstate(gi_store *s, uint32_t kind, void *kstate,
							 void (*free_fn) (gi_store *s, void *kstate));

/* enter the store's device and refuse a broken store: the top of every entry */
extern gi_status gi_cu_store_enter(gi_store *s);

#endif							/* GI_CUDA_STORE_H */
