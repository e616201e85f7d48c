/*
 * cuda_plan.cu
 *		The host side of the CUDA store's mutations: memory accounting, the
 *		mirror of the slab metadata, insert and delete planning, the patch
 *		list, and the helper threads that copy payloads into the pinned
 *		upload arenas.
 *
 * Nothing here calls CUDA (pool growth, gi_cu_grow_pool in cuda_store.cu,
 * is the one call out), so bench/store/plan_bench links this file and
 * cuda_keymap.cu with a stub for it and times the planning on any machine.
 *
 * Planning follows the host store record by record (gi_host_insert_one):
 * the key mode's skip (a present key; a present key and list pair), key
 * map growth, the list's head slab's first free slot,
 * else a slab from the free stack, else the never-used tail of the pool,
 * else pool growth.  Anything that can fail happens before the record
 * touches a structure, so an error (memory limit, allocation) leaves the
 * records before it planned and the store consistent, cut at the same
 * record as the host backend.  The per-record work is a key map probe (a
 * cache miss, prefetched 16 records ahead), a few updates of hot mirror
 * entries (the list's head slab, the list's counters) and one 24-byte
 * plan entry.
 */
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "cuda_store.h"
#include "cuda_util.cuh"

#define GI_CU_FULL_BITMAP 0xFFFFFFFFu

/* how far ahead the planning loops prefetch key map slots */
#ifndef GI_CU_PREFETCH
#define GI_CU_PREFETCH 16
#endif

/* ---- memory accounting -------------------------------------------------- */

/*
 * Bytes a store holds with a pool of nslabs slabs and a key map of map_cap
 * entries: the device side (list heads and counts; per slab the header,
 * the free-stack entry and the data block with its keys and key ordinals;
 * per slot the 32-bit ATT entry; the ordinal -> key array sized from the
 * map) plus the host side (mirror headers, dirty marks, stacks, per-row
 * ATT mirror, key chains and free rows, the key map, the free ordinals,
 * the kept pair set as it is now).
 * The single formula behind both the statistics and the memory limit, so
 * they can never disagree.  Search scratch, the upload arenas and an
 * insert call's own pair set are transient and not counted.
 * gi_cu_device_bytes() (cuda_store.cu) counts the device part alone.
 */
uint64_t
gi_cu_bytes_for(const gi_store *s, uint64_t nslabs, uint64_t map_cap)
{
	uint64_t	dev_slab = sizeof(gi_dslab) + sizeof(uint32_t) + s->slab_bytes
		+ (uint64_t) GI_SLAB_RECORDS * sizeof(uint32_t);
	uint64_t	host_slab = sizeof(gi_mslab) + 1 + 4 * sizeof(uint32_t)
		+ (uint64_t) GI_SLAB_RECORDS * 3 * sizeof(uint32_t);
	uint64_t	per_list = 2 * sizeof(uint32_t)		/* device head, rows */
		+ 3 * sizeof(uint32_t) + 1;		/* mirror head, rows, dirty */

	/* key ordinals: ordinal -> key on the device, free and held stacks */
	uint64_t	per_kid = sizeof(uint64_t) + 2 * sizeof(uint32_t);

	return sizeof(gi_store)
		+ (uint64_t) s->params.nlists * per_list
		+ nslabs * (dev_slab + host_slab)
		+ map_cap * sizeof(gi_cu_mapent)
		+ gi_cu_kid_cap(map_cap) * per_kid
		+ gi_pairset_bytes(&s->pairs.kept);
}

gi_status
gi_cu_limit_error(const gi_store *s, uint64_t need)
{
	gi_cu_set_error("store would need %llu bytes, over the limit of %llu bytes (gpuindex.memory_limit)",
					(unsigned long long) need,
					(unsigned long long) s->params.memory_limit);
	return GI_ERR_LIMIT;
}

bool
gi_cu_hbuf_reserve(gi_cu_hbuf *b, size_t bytes)
{
	void	   *p;
	size_t		cap;

	if (bytes <= b->cap)
		return true;
	cap = b->cap + b->cap / 2;
	if (cap < bytes)
		cap = bytes;
	p = realloc(b->p, cap);
	if (p == NULL)
		return false;
	b->p = p;
	b->cap = cap;
	return true;
}

/* ---- the mirror's arrays -------------------------------------------------- */

/*
 * The mirror's per-slab and per-slot arrays are private anonymous
 * mappings grown with mremap: a pool growth moves page tables, never
 * bytes (realloc copied the arrays whenever the allocator had put them on
 * its heap, 12 MB per growth at 1M records), and only the new pages are
 * touched.  mirror_bytes[] holds each array's mapped size.
 */
static size_t
gi_cu_page_round(size_t bytes)
{
	const size_t page = 4096;

	return (bytes + page - 1) & ~(page - 1);
}

static bool
gi_cu_grow_host(gi_store *s, int a, void **ptr, uint64_t elems, size_t elem_size)
{
	size_t		want;
	void	   *p;

	if (elems > SIZE_MAX / elem_size / 2)
		return false;
	want = gi_cu_page_round((size_t) elems * elem_size);
	if (want <= s->mirror_bytes[a])
		return true;
	if (*ptr == NULL)
		p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	else
		p = mremap(*ptr, s->mirror_bytes[a], want, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return false;
	*ptr = p;
	s->mirror_bytes[a] = want;
	return true;
}

/*
 * Room for want slabs in every mirror array (extra capacity after a
 * partial failure is harmless); the new entries are initialised by
 * gi_cu_init_mirror once the device side has grown too.
 */
bool
gi_cu_grow_mirror(gi_store *s, uint64_t want)
{
	if (!gi_cu_grow_host(s, 0, (void **) &s->slabs, want, sizeof(gi_mslab)) ||
		!gi_cu_grow_host(s, 1, (void **) &s->slab_dirty, want, 1) ||
		!gi_cu_grow_host(s, 2, (void **) &s->dirty_slabs, want, sizeof(uint32_t)) ||
		!gi_cu_grow_host(s, 3, (void **) &s->free_slabs, want, sizeof(uint32_t)) ||
		!gi_cu_grow_host(s, 4, (void **) &s->pending, want, sizeof(uint32_t)) ||
		!gi_cu_grow_host(s, 5, (void **) &s->held_slabs, want, sizeof(uint32_t)) ||
		!gi_cu_grow_host(s, 6, (void **) &s->att, want * GI_SLAB_RECORDS, sizeof(uint32_t)) ||
		!gi_cu_grow_host(s, 7, (void **) &s->row_next, want * GI_SLAB_RECORDS, sizeof(uint32_t)) ||
		!gi_cu_grow_host(s, 8, (void **) &s->free_rows, want * GI_SLAB_RECORDS, sizeof(uint32_t)))
	{
		gi_cu_set_error("out of host memory growing the pool to %llu slabs",
						(unsigned long long) want);
		return false;
	}
	return true;
}

void
gi_cu_init_mirror(gi_store *s, uint64_t old, uint64_t want)
{
	uint64_t	i;

	for (i = old; i < want; i++)
	{
		gi_mslab   *m = &s->slabs[i];

		m->next = GI_NIL;
		m->prev = GI_NIL;
		m->list = GI_NIL;
		m->count = 0;
		m->bitmap = 0;
		m->held = 0;
		s->slab_dirty[i] = 0;
	}
	/* ATT_NONE and GI_NIL are both all ones */
	memset(s->att + old * GI_SLAB_RECORDS, 0xFF,
		   (want - old) * GI_SLAB_RECORDS * sizeof(uint32_t));
	memset(s->row_next + old * GI_SLAB_RECORDS, 0xFF,
		   (want - old) * GI_SLAB_RECORDS * sizeof(uint32_t));
	s->nslabs = (uint32_t) want;
}

void
gi_cu_free_mirror(gi_store *s)
{
	void	   *arrays[9] = {s->slabs, s->slab_dirty, s->dirty_slabs, s->free_slabs,
		s->pending, s->held_slabs, s->att, s->row_next, s->free_rows};
	int			a;

	for (a = 0; a < 9; a++)
		if (arrays[a] != NULL && s->mirror_bytes[a] != 0)
			munmap(arrays[a], s->mirror_bytes[a]);
	s->slabs = NULL;
	s->slab_dirty = NULL;
	s->dirty_slabs = NULL;
	s->free_slabs = NULL;
	s->pending = NULL;
	s->held_slabs = NULL;
	s->att = NULL;
	s->row_next = NULL;
	s->free_rows = NULL;
	memset(s->mirror_bytes, 0, sizeof(s->mirror_bytes));
	free(s->list_head);
	free(s->list_rows);
	free(s->list_dirty);
	free(s->dirty_lists);
	s->list_head = NULL;
	s->list_rows = NULL;
	s->list_dirty = NULL;
	s->dirty_lists = NULL;
	free(s->h_patch.p);
	free(s->h_rows.p);
	s->h_patch.p = NULL;
	s->h_rows.p = NULL;
	gi_cu_map_free(s);
}

/* ---- patches: link changes of the mirror, copied to the device ---------- */

/*
 * Turn the dirty marks into patches: first every header link, list count
 * and free-stack entry (phase A), then the list heads (phase B).  Phase B
 * runs as a later kernel, so a concurrent reader that sees a new head also
 * sees the links of the slab it points to.  *nfirst receives the size of
 * phase A.  Values are the mirror's final ones, so the order of the
 * patches inside a phase does not matter.  Only device addresses are
 * computed here; nothing is dereferenced.
 */
uint64_t
gi_cu_patch_bound(const gi_store *s)
{
	return 3 * (uint64_t) s->ndirty_slabs + 2 * (uint64_t) s->ndirty_lists
		+ (s->nfree > s->free_low ? s->nfree - s->free_low : 0);
}

/* collect into p (room for gi_cu_patch_bound() entries); returns the count */
uint32_t
gi_cu_collect_patches_into(gi_store *s, gi_cu_patch *p, uint32_t *nfirst)
{
	uint32_t	n = 0;
	uint32_t	i;

#define GI_PUSH(a, v) do { p[n].addr = (a); p[n].value = (v); p[n].pad = 0; n++; } while (0)
	for (i = 0; i < s->ndirty_slabs; i++)
	{
		uint32_t	slab = s->dirty_slabs[i];
		const gi_mslab *m = &s->slabs[slab];

		GI_PUSH(&s->d_slabs[slab].next, m->next);
		GI_PUSH(&s->d_slabs[slab].prev, m->prev);
		GI_PUSH(&s->d_slabs[slab].list, m->list);
		s->slab_dirty[slab] = 0;
	}
	s->ndirty_slabs = 0;
	for (i = 0; i < s->ndirty_lists; i++)
	{
		uint32_t	l = s->dirty_lists[i];

		GI_PUSH(&s->d_lists[2 * (uint64_t) l + 1], s->list_rows[l]);
	}
	for (i = s->free_low; i < s->nfree; i++)
		GI_PUSH(&s->d_free[i], s->free_slabs[i]);
	s->free_low = s->nfree;
	*nfirst = n;
	for (i = 0; i < s->ndirty_lists; i++)
	{
		uint32_t	l = s->dirty_lists[i];

		GI_PUSH(&s->d_lists[2 * (uint64_t) l], s->list_head[l]);
		s->list_dirty[l] = 0;
	}
	s->ndirty_lists = 0;
#undef GI_PUSH
	return n;
}

/* ---- insert planning ------------------------------------------------------ */

/*
 * The list's head slab is full (or the list is empty): take a slab from
 * the free stack, else from the never-used tail, else grow the pool, and
 * link it as the new head.  The rare path of planning, out of line.
 */
static gi_status __attribute__((noinline))
gi_cu_new_head(gi_store *s, uint32_t list, uint32_t *headp)
{
	uint32_t	head = s->list_head[list];
	uint32_t	slab;
	gi_mslab   *h;
	gi_status	st;

	if (s->nfree > 0)
	{
		slab = s->free_slabs[--s->nfree];
		if (s->nfree < s->free_low)
			s->free_low = s->nfree;
	}
	else
	{
		if (s->slab_hwm == s->nslabs)
		{
			uint64_t	t0 = gi_cu_now_ns();

			st = gi_cu_grow_pool(s);
			s->prof.grow_ns += gi_cu_now_ns() - t0;
			s->prof.ngrow++;
			if (st != GI_OK)
				return st;
		}
		slab = s->slab_hwm++;
	}
	h = &s->slabs[slab];
	h->list = list;
	h->prev = GI_NIL;
	h->next = head;
	gi_cu_mark_slab(s, slab);
	if (head != GI_NIL)
	{
		s->slabs[head].prev = slab;
		gi_cu_mark_slab(s, head);
	}
	s->list_head[list] = slab;
	s->slabs_used++;
	*headp = slab;
	return GI_OK;
}

/* the list of a live row (gi_pairs_list_fn) */
uint32_t
gi_cu_row_list(const void *store, uint32_t row)
{
	const gi_store *s = (const gi_store *) store;

	return s->slabs[GI_CU_LOC_SLAB(s->att[row])].list;
}

/* the most slots the kept pair set may have under the memory limit */
static uint64_t
gi_cu_kept_cap_max(const gi_store *s)
{
	return gi_pairs_kept_cap_max(s->params.memory_limit,
								 gi_cu_bytes_for(s, s->nslabs, s->map_cap)
								 - gi_pairset_bytes(&s->pairs.kept));
}

/* the status of a gi_pairs call that answered rc < 0 */
static gi_status
gi_cu_pairs_error(const gi_store *s, int rc)
{
	if (rc == -2)
		return gi_cu_limit_error(s, gi_cu_bytes_for(s, s->nslabs, s->map_cap)
								 - gi_pairset_bytes(&s->pairs.kept)
								 + gi_pairset_cap_for(&s->pairs.kept, 2) * sizeof(gi_pairset_ent));
	gi_cu_set_error("out of memory growing the (key, list) pair set");
	return GI_ERR_NOMEM;
}

/*
 * Plan records [from, to) of a batch into plan[*nplan ...]: the mirror is
 * updated as the host store would be, and each inserted record gets a
 * plan entry (key, index inside the chunk, slab * 32 + slot, row).
 * *done counts the records inserted.  On error the records before the
 * failing one are planned (and must be shipped) and the store is
 * consistent.
 */
gi_status
gi_cu_plan_insert(gi_store *s, const uint32_t *lists, const uint64_t *keys,
				  uint32_t from, uint32_t to, gi_cu_plan *plan, uint32_t *nplan,
				  uint64_t *done)
{
	const uint32_t mode = s->params.key_mode;
	uint32_t	np = *nplan;
	uint64_t	ndone = 0;
	gi_status	st = GI_OK;
	/* hashes of the records ahead, computed once for prefetch and probe */
	uint64_t	hring[GI_CU_PREFETCH];
	uint32_t	r;

	for (r = from; r < to && r < from + GI_CU_PREFETCH; r++)
	{
		hring[r % GI_CU_PREFETCH] = gi_cu_hash(keys[r]);
		__builtin_prefetch(&s->map[hring[r % GI_CU_PREFETCH] & (s->map_cap - 1)]);
	}
	for (r = from; r < to; r++)
	{
		uint64_t	key = keys[r];
		uint32_t	list = lists[r];
		uint64_t	hash = hring[r % GI_CU_PREFETCH];
		uint64_t	mask;
		uint64_t	mi;
		bool		found = false;
		int			rc;
		uint32_t	head;
		uint32_t	slot;
		uint32_t	row;
		uint32_t	loc;
		uint32_t	kid;
		gi_mslab   *h;
		gi_cu_mapent *m;

		m = s->map;
		mask = s->map_cap - 1;
		if (r + GI_CU_PREFETCH < to)
		{
			uint64_t	ha = gi_cu_hash(keys[r + GI_CU_PREFETCH]);

			hring[r % GI_CU_PREFETCH] = ha;
			__builtin_prefetch(&m[ha & mask]);
		}

		/* probe: the key's entry, or the empty slot where it would go */
		mi = hash & mask;
		while (m[mi].row1 != 0)
		{
			if (m[mi].key == key)
			{
				found = true;
				break;
			}
			mi = (mi + 1) & mask;
		}
		/* the key mode's skips; a pair repeated in this call is present by now */
		if (found && mode == GI_KEYS_UNIQUE)
			continue;
		if (mode == GI_KEYS_PER_LIST)
		{
			rc = gi_pairs_present(&s->pairs, key, list, found ? m[mi].row1 - 1 : GI_NIL,
								  s->row_next, gi_cu_row_list, s,
								  gi_cu_kept_cap_max(s), NULL);
			if (rc < 0)
			{
				st = gi_cu_pairs_error(s, rc);
				break;
			}
			if (rc == 1)
				continue;
		}

		/* first everything that can fail, before any structure changes */
		if (mode == GI_KEYS_PER_LIST &&
			(rc = gi_pairs_reserve(&s->pairs, gi_cu_kept_cap_max(s))) < 0)
		{
			st = gi_cu_pairs_error(s, rc);
			break;
		}
		/* held ordinals (concurrent mode) can outrun the live keys: grow too */
		if (!found && (!gi_cu_map_has_room(s) ||
					   (s->nfree_kids == 0 && s->kid_hwm + 1 >= gi_cu_kid_cap(s->map_cap))))
		{
			st = gi_cu_map_resize(s, s->map_cap * 2);
			if (st != GI_OK)
				break;
			m = s->map;
			mask = s->map_cap - 1;
			mi = hash & mask;
			while (m[mi].row1 != 0)
				mi = (mi + 1) & mask;
		}
		head = s->list_head[list];
		if (head == GI_NIL ||
			(s->slabs[head].bitmap | s->slabs[head].held) == GI_CU_FULL_BITMAP)
		{
			st = gi_cu_new_head(s, list, &head);
			if (st != GI_OK)
				break;
		}
		h = &s->slabs[head];
		slot = (uint32_t) __builtin_ctz(~(h->bitmap | h->held));

		/* live rows < slots in the pool, so a row id is always available */
		if (s->nfree_rows > 0)
			row = s->free_rows[--s->nfree_rows];
		else
			row = s->row_hwm++;

		h->bitmap |= 1u << slot;
		h->count++;
		loc = GI_CU_LOC(head, slot);
		s->att[row] = loc;
		s->list_rows[list]++;
		gi_cu_mark_list(s, list);
		if (!found)
		{
			/* a new key takes an ordinal: live keys fit the map, so one is free */
			kid = s->nfree_kids > 0 ? s->free_kids[--s->nfree_kids] : s->kid_hwm++;
			s->row_next[row] = GI_NIL;
			m[mi].key = key;
			m[mi].row1 = row + 1;
			m[mi].kid = kid;
			s->map_count++;
		}
		else
		{
			kid = m[mi].kid;
			s->row_next[row] = m[mi].row1 - 1;
			m[mi].row1 = row + 1;
		}
		if (mode == GI_KEYS_PER_LIST)
			gi_pairs_added(&s->pairs, key, list, NULL);

		plan[np].key = key;
		plan[np].src = r - from;
		plan[np].loc = loc;
		plan[np].row = row;
		plan[np].kid = kid;
		np++;
		ndone++;
	}
	s->rows += ndone;
	s->inserts += ndone;
	*done += ndone;
	*nplan = np;
	return st;
}

/* ---- delete planning ------------------------------------------------------ */

/* unlink an emptied slab from its list in the mirror */
static void
gi_cu_release_slab(gi_store *s, uint32_t slab)
{
	gi_mslab   *h = &s->slabs[slab];
	uint32_t	list = h->list;

	if (h->prev != GI_NIL)
	{
		s->slabs[h->prev].next = h->next;
		gi_cu_mark_slab(s, h->prev);
	}
	else
	{
		s->list_head[list] = h->next;
		gi_cu_mark_list(s, list);
	}
	if (h->next != GI_NIL)
	{
		s->slabs[h->next].prev = h->prev;
		gi_cu_mark_slab(s, h->next);
	}
	/* next stays: a reader standing here still reaches the rest */
	h->list = GI_NIL;
	h->prev = GI_NIL;
	gi_cu_mark_slab(s, slab);
	s->slabs_used--;
	if (s->concurrent)
		s->pending[s->npending++] = slab;
	else
		s->free_slabs[s->nfree++] = slab;
}

static inline void
gi_cu_remove_row(gi_store *s, uint32_t row, uint32_t *out)
{
	uint32_t	a = s->att[row];
	uint32_t	slab = GI_CU_LOC_SLAB(a);
	uint32_t	slot = GI_CU_LOC_SLOT(a);
	gi_mslab   *h = &s->slabs[slab];

	h->bitmap &= ~(1u << slot);
	h->count--;
	s->list_rows[h->list]--;
	gi_cu_mark_list(s, h->list);
	if (s->concurrent)
	{
		if (h->held == 0)
			s->held_slabs[s->nheld++] = slab;
		h->held |= 1u << slot;
	}
	s->att[row] = GI_CU_ATT_NONE;
	s->row_next[row] = GI_NIL;
	s->free_rows[s->nfree_rows++] = row;
	*out = row;
	if (h->count == 0)
		gi_cu_release_slab(s, slab);
}

/*
 * The delete's host side: each key's rows come off the mirror and their
 * ids go to s->h_rows[0, s->nrows_del) for the device.  A software
 * pipeline overlaps the cache misses of successive keys: the map slot of
 * key i+16 is prefetched (its hash kept), key i+8 is looked up and its
 * row's ATT and chain entries prefetched (the slot kept), the ATT entry of
 * key i+4 is read and its slab header prefetched.  Key i then starts from
 * the slot found for it when that entry still holds it (removals of the
 * keys in between may shift it back towards its home: then it is looked
 * up again), so each key is hashed and probed once.
 */
gi_status
gi_cu_plan_delete(gi_store *s, uint32_t n, const uint64_t *keys, uint64_t *done)
{
	uint64_t	hring[16];
	uint64_t	sring[16];
	uint32_t	rring[16];
	uint64_t	ndone = 0;
	uint32_t   *out;
	size_t		cap;
	uint32_t	i;

	s->nrows_del = 0;
	cap = n < 1024 ? 1024 : n;
	if (!gi_cu_hbuf_reserve(&s->h_rows, cap * sizeof(uint32_t)))
	{
		gi_cu_set_error("out of memory deleting %u keys", n);
		return GI_ERR_NOMEM;
	}
	cap = s->h_rows.cap / sizeof(uint32_t);
	out = (uint32_t *) s->h_rows.p;
	for (i = 0; i < n && i < 16; i++)
	{
		hring[i] = gi_cu_hash(keys[i]);
		__builtin_prefetch(&s->map[hring[i] & (s->map_cap - 1)]);
	}
	for (i = 0; i < n && i < 8; i++)
	{
		uint64_t	mi = gi_cu_map_find(s, keys[i]);

		sring[i] = mi;
		rring[i] = mi == GI_CU_MAP_NONE ? GI_NIL : s->map[mi].row1 - 1;
	}
	for (i = 0; i < n; i++)
	{
		const gi_cu_mapent *m = s->map;
		const uint64_t mask = s->map_cap - 1;
		uint64_t	key = keys[i];
		uint64_t	hash = hring[i & 15];	/* before key i+16 takes its place */
		uint64_t	mi;
		uint32_t	row;
		uint32_t	c;

		if (i + 16 < n)
		{
			uint64_t	h = gi_cu_hash(keys[i + 16]);

			hring[(i + 16) & 15] = h;
			__builtin_prefetch(&m[h & mask]);
		}
		if (i + 8 < n)
		{
			uint64_t	k8 = keys[i + 8];
			uint64_t	p = hring[(i + 8) & 15] & mask;

			while (m[p].row1 != 0 && m[p].key != k8)
				p = (p + 1) & mask;
			if (m[p].row1 != 0)
			{
				row = m[p].row1 - 1;
				sring[(i + 8) & 15] = p;
				rring[(i + 8) & 15] = row;
				__builtin_prefetch(&s->att[row]);
				__builtin_prefetch(&s->row_next[row]);
			}
			else
			{
				sring[(i + 8) & 15] = GI_CU_MAP_NONE;
				rring[(i + 8) & 15] = GI_NIL;
			}
		}
		if (i + 4 < n && rring[(i + 4) & 15] != GI_NIL)
		{
			uint32_t	a = s->att[rring[(i + 4) & 15]];

			if (a != GI_CU_ATT_NONE)
				__builtin_prefetch(&s->slabs[GI_CU_LOC_SLAB(a)]);
		}

		/* the slot found ahead, if the key is still there; else look again */
		mi = sring[i & 15];
		if (mi == GI_CU_MAP_NONE || m[mi].row1 == 0 || m[mi].key != key)
		{
			mi = hash & mask;
			while (m[mi].row1 != 0 && m[mi].key != key)
				mi = (mi + 1) & mask;
			if (m[mi].row1 == 0)
				continue;		/* unknown or already deleted */
		}
		/* room for this key's rows before the mirror changes */
		c = 0;
		for (row = m[mi].row1 - 1; row != GI_NIL; row = s->row_next[row])
			c++;
		if (s->nrows_del + (size_t) c > cap)
		{
			if (!gi_cu_hbuf_reserve(&s->h_rows, ((size_t) s->nrows_del + c) * sizeof(uint32_t)))
			{
				gi_cu_set_error("out of memory deleting %u keys", n);
				s->rows -= ndone;
				s->deletes += ndone;
				*done += ndone;
				return GI_ERR_NOMEM;
			}
			cap = s->h_rows.cap / sizeof(uint32_t);
			out = (uint32_t *) s->h_rows.p;
		}
		row = m[mi].row1 - 1;
		if (s->params.key_mode == GI_KEYS_PER_LIST)
			gi_pairs_forget(&s->pairs, key, row, s->row_next, gi_cu_row_list, s, NULL);
		while (row != GI_NIL)
		{
			uint32_t	next = s->row_next[row];

			gi_cu_remove_row(s, row, &out[s->nrows_del++]);
			ndone++;
			row = next;
		}
		/* the ordinal is reused last-in first-out; held while searches may run */
		if (s->concurrent)
			s->held_kids[s->nheld_kids++] = m[mi].kid;
		else
			s->free_kids[s->nfree_kids++] = m[mi].kid;
		gi_cu_map_remove(s, mi);
	}
	s->rows -= ndone;
	s->deletes += ndone;
	*done += ndone;
	return GI_OK;
}

/* ---- helper threads: payload copies, map rehashes ------------------------ */

/*
 * While the planning thread plans a chunk, helper threads copy the chunk's
 * payload into its pinned upload arena (a memcpy at one thread's memory
 * bandwidth was as long as the planning itself); a key map resize rehashes
 * on them too.  A job is cut into parts that the helpers and, in
 * gi_cu_par_end, the calling thread take by an atomic counter, so the
 * caller never waits for a helper that has not woken up yet.  One pool per
 * process, created on first use; one job at a time (a caller that finds
 * the pool busy, e.g. a rehash while a copy is in flight or another
 * thread's store, does the work alone).  GI_CUDA_COPY_THREADS sets the
 * number of helpers (0: none).
 */
#define GI_CU_COPY_PART ((size_t) 256 << 10)
#define GI_CU_COPY_MIN ((size_t) 512 << 10)
#define GI_CU_COPY_MAX_THREADS 16
/* maps with fewer keys rehash on the calling thread */
#define GI_CU_REHASH_PAR_MIN 32768

typedef void (*gi_cu_part_fn) (void *arg, uint32_t part);

namespace
{
struct gi_cu_pool
{
	std::mutex	mu;				/* job fields, generation, helpers' sleep */
	std::condition_variable cv;
	std::atomic<bool> busy{false};	/* one job at a time */
	int			nthreads = -1;	/* -1: not started */
	uint64_t	gen = 0;
	gi_cu_part_fn fn = nullptr;
	void	   *arg = nullptr;
	uint32_t	nparts = 0;
	std::atomic<uint32_t> next{0};
	std::atomic<uint32_t> finished{0};
	std::atomic<uint32_t> active{0};	/* helpers inside the current job */
};

/*
 * Never destroyed: at exit the helpers still sleep on its condition
 * variable, and destroying a condition variable with waiters hangs.
 */
gi_cu_pool &gi_pool = *new gi_cu_pool();
int			gi_copy_want = -1;	/* set by gi_cu_copy_set_threads */
thread_local bool gi_par_mine = false;	/* this thread runs the pool's job */

void
gi_cu_pool_worker(gi_cu_pool *c)
{
	uint64_t	seen = 0;

	for (;;)
	{
		{
			std::unique_lock<std::mutex> lk(c->mu);

			c->cv.wait(lk, [&] { return c->gen != seen; });
			seen = c->gen;
			/* join under the lock: the job's fields stay put until we leave */
			c->active.fetch_add(1, std::memory_order_acq_rel);
		}
		for (;;)
		{
			uint32_t	k = c->next.fetch_add(1, std::memory_order_acq_rel);

			if (k >= c->nparts)
				break;
			c->fn(c->arg, k);
			c->finished.fetch_add(1, std::memory_order_acq_rel);
		}
		c->active.fetch_sub(1, std::memory_order_acq_rel);
	}
}

int
gi_cu_copy_default_threads(void)
{
	static int	from_env = -2;

	if (gi_copy_want >= 0)
		return gi_copy_want;
	if (from_env == -2)
	{
		const char *e = getenv("GI_CUDA_COPY_THREADS");
		unsigned	hw = std::thread::hardware_concurrency();
		int			n;

		if (e != NULL && *e != '\0')
			n = atoi(e);
		else
			n = hw > 1 ? (int) (hw - 1 < 4 ? hw - 1 : 4) : 0;
		if (n < 0)
			n = 0;
		if (n > GI_CU_COPY_MAX_THREADS)
			n = GI_CU_COPY_MAX_THREADS;
		from_env = n;
	}
	return from_env;
}

/*
 * Start the helpers once; they are never stopped (they sleep between
 * jobs).  The module must therefore never be dlclose'd while the process
 * lives: the device service and the test programs never do.
 */
int
gi_cu_pool_start(gi_cu_pool &c)
{
	int			want = gi_cu_copy_default_threads();
	sigset_t	all;
	sigset_t	old;

	if (c.nthreads < 0)
		c.nthreads = 0;
	if (c.nthreads >= want)
		return want;
	/*
	 * The helpers start with every signal blocked but their own faults, so
	 * that the host process's handlers (PostgreSQL's, in the device service)
	 * keep running on its own thread, and a fault on a helper reaches the
	 * process's fault handler (a blocked fault signal kills the process).
	 */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (c.nthreads < want)
	{
		try
		{
			std::thread t(gi_cu_pool_worker, &c);

			t.detach();
			c.nthreads++;
		}
		catch (...)
		{
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return want < c.nthreads ? want : c.nthreads;
}

/*
 * Hand fn(arg, 0 .. nparts-1) to the helpers; false (nothing started) when
 * there are none or the pool is busy: the caller then works alone.
 */
bool
gi_cu_par_begin(gi_cu_part_fn fn, void *arg, uint32_t nparts)
{
	gi_cu_pool &c = gi_pool;
	bool		expect = false;
	int			helpers;

	if (gi_cu_copy_default_threads() == 0 ||
		!c.busy.compare_exchange_strong(expect, true, std::memory_order_acq_rel))
		return false;
	{
		std::unique_lock<std::mutex> lk(c.mu);

		helpers = gi_cu_pool_start(c);
		if (helpers == 0)
		{
			c.busy.store(false, std::memory_order_release);
			return false;
		}
		/* a helper that joined the previous job late leaves it first */
		while (c.active.load(std::memory_order_acquire) != 0)
			std::this_thread::yield();
		c.fn = fn;
		c.arg = arg;
		c.nparts = nparts;
		c.next.store(0, std::memory_order_relaxed);
		c.finished.store(0, std::memory_order_relaxed);
		c.gen++;
	}
	c.cv.notify_all();
	gi_par_mine = true;
	return true;
}

/* finish the job begun by gi_cu_par_begin: help, then wait for the helpers */
void
gi_cu_par_end(void)
{
	gi_cu_pool &c = gi_pool;

	if (!gi_par_mine)
		return;
	for (;;)
	{
		uint32_t	k = c.next.fetch_add(1, std::memory_order_acq_rel);

		if (k >= c.nparts)
			break;
		c.fn(c.arg, k);
		c.finished.fetch_add(1, std::memory_order_acq_rel);
	}
	while (c.finished.load(std::memory_order_acquire) < c.nparts)
		std::this_thread::yield();
	gi_par_mine = false;
	c.busy.store(false, std::memory_order_release);
}

/* the payload copy job */
struct gi_cu_copy_job
{
	unsigned char *dst;
	const unsigned char *src;
	size_t		bytes;
	bool		running;
};

thread_local gi_cu_copy_job gi_copy_job;

void
gi_cu_copy_part(void *arg, uint32_t k)
{
	gi_cu_copy_job *j = (gi_cu_copy_job *) arg;
	size_t		off = (size_t) k * GI_CU_COPY_PART;
	size_t		len = j->bytes - off < GI_CU_COPY_PART ? j->bytes - off : GI_CU_COPY_PART;

	memcpy(j->dst + off, j->src + off, len);
}

/* the rehash job: a range of the old table into the new one */
struct gi_cu_rehash_job
{
	const gi_cu_mapent *old;
	uint64_t	oldcap;
	gi_cu_mapent *m;
	uint64_t	cap;
	uint32_t	nparts;
};

void
gi_cu_rehash_part(void *arg, uint32_t k)
{
	gi_cu_rehash_job *j = (gi_cu_rehash_job *) arg;
	uint64_t	from = j->oldcap * k / j->nparts;
	uint64_t	to = j->oldcap * (k + 1) / j->nparts;
	uint64_t	mask = j->cap - 1;
	uint64_t	i;

	for (i = from; i < to; i++)
	{
		uint32_t	r1 = j->old[i].row1;
		uint64_t	key;
		uint64_t	h;

		if (r1 == 0)
			continue;
		key = j->old[i].key;
		/*
		 * Claim the first empty slot from the key's home by CAS on row1:
		 * every key is distinct, slots never empty again, so any
		 * interleaving of the claims is a valid linear-probing table.
		 */
		for (h = gi_cu_hash(key) & mask;; h = (h + 1) & mask)
		{
			uint32_t	expect = 0;

			if (__atomic_load_n(&j->m[h].row1, __ATOMIC_RELAXED) == 0 &&
				__atomic_compare_exchange_n(&j->m[h].row1, &expect, r1, false,
											__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			{
				j->m[h].key = key;
				j->m[h].kid = j->old[i].kid;
				break;
			}
		}
	}
}
}								/* namespace */

/* set the helper count (tests, benchmarks); only more can be started */
void
gi_cu_copy_set_threads(int n)
{
	gi_copy_want = n < 0 ? -1 : (n > GI_CU_COPY_MAX_THREADS ? GI_CU_COPY_MAX_THREADS : n);
}

int
gi_cu_copy_threads(void)
{
	return gi_cu_copy_default_threads();
}

/*
 * Start copying bytes from src to dst; the helpers copy while the caller
 * goes on.  gi_cu_copy_end() must follow before dst is used or src
 * changes.  Small copies, or no helpers, or the pool busy: copied right
 * here.
 */
void
gi_cu_copy_begin(void *dst, const void *src, size_t bytes)
{
	gi_cu_copy_job *j = &gi_copy_job;

	j->running = false;
	if (bytes >= GI_CU_COPY_MIN)
	{
		j->dst = (unsigned char *) dst;
		j->src = (const unsigned char *) src;
		j->bytes = bytes;
		if (gi_cu_par_begin(gi_cu_copy_part, j,
							(uint32_t) ((bytes + GI_CU_COPY_PART - 1) / GI_CU_COPY_PART)))
		{
			j->running = true;
			return;
		}
	}
	if (bytes)
		memcpy(dst, src, bytes);
}

/* finish the copy begun by gi_cu_copy_begin */
void
gi_cu_copy_end(void)
{
	if (gi_copy_job.running)
	{
		gi_copy_job.running = false;
		gi_cu_par_end();
	}
}

/*
 * Re-insert every entry of the old table (oldcap slots) into the new one
 * (cap slots, all empty): on the helpers for large maps, else here.
 */
void
gi_cu_map_rehash(const gi_cu_mapent *old, uint64_t oldcap, uint64_t count,
				 gi_cu_mapent *m, uint64_t cap)
{
	gi_cu_rehash_job j;
	uint64_t	i;

	if (count >= GI_CU_REHASH_PAR_MIN)
	{
		j.old = old;
		j.oldcap = oldcap;
		j.m = m;
		j.cap = cap;
		j.nparts = (uint32_t) (4 * (gi_cu_copy_default_threads() + 1));
		if (gi_cu_par_begin(gi_cu_rehash_part, &j, j.nparts))
		{
			gi_cu_par_end();
			return;
		}
	}
	for (i = 0; i < oldcap; i++)
		if (old[i].row1 != 0)
			gi_cu_map_put(m, cap, old[i].key, old[i].row1 - 1, old[i].kid);
}
