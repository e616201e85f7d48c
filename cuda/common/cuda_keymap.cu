/*
 * cuda_keymap.cu
 *		The key -> rows map of the CUDA store, kept on the host side.
 *
 * The device service calls a store from one thread, serially, so the map
 * needs no device copy: a delete looks its key up here in O(1), walks the
 * key's own rows (row_next chain) and hands the row ids to the device,
 * which finds each row's slot through the device ATT.  The map follows the
 * host store (src/backend/host/host_store.c): open addressing, linear probing,
 * backward-shift deletion (no tombstones), load factor at most 2/3, the
 * murmur3 finalizer as hash.  Differences, for speed (planning touches one
 * random map slot per record, a cache miss on a map of millions of keys):
 *
 *	- one 16-byte entry per slot (key, row + 1; 0 = empty), so a probe
 *	  touches one cache line, not one in a key array and one in a row
 *	  array; a fresh table is all zeros, so it needs no initialising pass;
 *	- tables of 2 MB and more are mapped with transparent huge pages
 *	  (madvise), a few page faults instead of one per 4 KB;
 *	- an insert batch pre-sizes the map for all its keys at once
 *	  (gi_cu_map_reserve) when the map and the pool the batch could need
 *	  fit under the memory limit together, so a large batch rehashes once
 *	  instead of once per doubling.  Otherwise the map doubles when full,
 *	  as the host store's does, and the memory limit strikes at the record
 *	  that needs the growth;
 *	- large maps rehash on the helper threads (gi_cu_map_rehash in
 *	  cuda_plan.cu): slots are claimed by compare-and-swap, which any
 *	  interleaving of distinct keys turns into a valid table.
 *
 * With GI_KEYS_PER_LIST a second map, (key, list) -> row, answers "does
 * this key own a record in this list" in O(1) however many records the
 * key owns (the host store keeps the same map): the same layout (16-byte
 * entries, linear probing, backward-shift deletion, load factor 2/3),
 * grown when full, pre-sized for a batch under the same rule as the key
 * map, counted in the store's bytes.
 *
 * The find / prefetch / has-room helpers are inline in cuda_store.h.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

#include "cuda_store.h"
#include "cuda_util.cuh"

/* tables of at least this many bytes are mmap'ed with huge pages */
#define GI_CU_MAP_HUGE ((size_t) 2 << 20)

static gi_cu_mapent *
gi_cu_map_alloc(uint64_t cap, size_t *mapped)
{
	size_t		bytes = (size_t) cap * sizeof(gi_cu_mapent);
	unsigned char *p;
	unsigned char *a;

	*mapped = 0;
	if (bytes < GI_CU_MAP_HUGE)
		return (gi_cu_mapent *) calloc(cap, sizeof(gi_cu_mapent));
	/* 2 MB aligned, or the kernel cannot back it with huge pages */
	bytes = (bytes + GI_CU_MAP_HUGE - 1) & ~(GI_CU_MAP_HUGE - 1);
	p = (unsigned char *) mmap(NULL, bytes + GI_CU_MAP_HUGE, PROT_READ | PROT_WRITE,
							   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (unsigned char *) (((uintptr_t) p + GI_CU_MAP_HUGE - 1) & ~(uintptr_t) (GI_CU_MAP_HUGE - 1));
	if (a > p)
		munmap(p, a - p);
	if (a + bytes < p + bytes + GI_CU_MAP_HUGE)
		munmap(a + bytes, (p + bytes + GI_CU_MAP_HUGE) - (a + bytes));
#ifdef MADV_HUGEPAGE
	(void) madvise(a, bytes, MADV_HUGEPAGE);
#endif
	*mapped = bytes;
	return (gi_cu_mapent *) a;	/* anonymous pages are zero: all empty */
}

static void
gi_cu_map_release(gi_cu_mapent *m, size_t mapped)
{
	if (m == NULL)
		return;
	if (mapped)
		munmap(m, mapped);
	else
		free(m);
}

void
gi_cu_map_free(gi_store *s)
{
	free(s->free_kids);
	free(s->held_kids);
	s->free_kids = NULL;
	s->held_kids = NULL;
	s->kid_cap = 0;
	gi_cu_map_release(s->map, s->map_bytes);
	s->map = NULL;
	s->map_bytes = 0;
	gi_pairs_free(&s->pairs);
}

void
gi_cu_map_put(gi_cu_mapent *m, uint64_t cap, uint64_t key, uint32_t row, uint32_t kid)
{
	uint64_t	mask = cap - 1;
	uint64_t	i = gi_cu_hash(key) & mask;

	while (m[i].row1 != 0)
		i = (i + 1) & mask;
	m[i].key = key;
	m[i].row1 = row + 1;
	m[i].kid = kid;
}

void
gi_cu_map_remove(gi_store *s, uint64_t i)
{
	gi_cu_mapent *m = s->map;
	uint64_t	mask = s->map_cap - 1;
	uint64_t	j = i;

	for (;;)
	{
		uint64_t	home;

		j = (j + 1) & mask;
		if (m[j].row1 == 0)
			break;
		home = gi_cu_hash(m[j].key) & mask;
		if (((j - home) & mask) >= ((j - i) & mask))
		{
			m[i] = m[j];
			i = j;
		}
	}
	m[i].row1 = 0;
	m[i].key = 0;
	m[i].kid = 0;
	s->map_count--;
}

/*
 * Room for the key ordinals a map of map_cap entries can hold: the host's
 * free and held stacks here, the device's ordinal -> key array through the
 * store's hook.  Extra capacity after a failure is harmless.
 */
static gi_status
gi_cu_kids_reserve(gi_store *s, uint64_t map_cap)
{
	uint64_t	cap = gi_cu_kid_cap(map_cap);
	uint32_t   *f;
	uint32_t   *h;

	if (cap > s->kid_cap)
	{
		if (cap > SIZE_MAX / sizeof(uint32_t))
		{
			gi_cu_set_error("%llu key ordinals are too many", (unsigned long long) cap);
			return GI_ERR_NOMEM;
		}
		f = (uint32_t *) realloc(s->free_kids, (size_t) cap * sizeof(uint32_t));
		if (f != NULL)
			s->free_kids = f;
		h = (uint32_t *) realloc(s->held_kids, (size_t) cap * sizeof(uint32_t));
		if (h != NULL)
			s->held_kids = h;
		if (f == NULL || h == NULL)
		{
			gi_cu_set_error("out of memory for %llu key ordinals", (unsigned long long) cap);
			return GI_ERR_NOMEM;
		}
		s->kid_cap = cap;
	}
	return s->grow_kids ? s->grow_kids(s, map_cap) : GI_OK;
}

gi_status
gi_cu_map_resize(gi_store *s, uint64_t newcap)
{
	gi_cu_mapent *m;
	size_t		mapped;
	uint64_t	need = gi_cu_bytes_for(s, s->nslabs, newcap);
	uint64_t	t0 = gi_cu_now_ns();

	if (s->params.memory_limit != 0 && need > s->params.memory_limit)
		return gi_cu_limit_error(s, need);
	if (newcap > SIZE_MAX / sizeof(gi_cu_mapent))
	{
		gi_cu_set_error("key map of %llu entries is too large",
						(unsigned long long) newcap);
		return GI_ERR_NOMEM;
	}
	m = gi_cu_map_alloc(newcap, &mapped);
	if (m == NULL)
	{
		gi_cu_set_error("out of memory growing the key map to %llu entries",
						(unsigned long long) newcap);
		return GI_ERR_NOMEM;
	}
	{
		gi_status	st = gi_cu_kids_reserve(s, newcap);

		if (st != GI_OK)
		{
			gi_cu_map_release(m, mapped);
			return st;
		}
	}
	gi_cu_map_rehash(s->map, s->map_cap, s->map_count, m, newcap);
	gi_cu_map_release(s->map, s->map_bytes);
	s->map = m;
	s->map_bytes = mapped;
	s->map_cap = newcap;
	s->prof.map_ns += gi_cu_now_ns() - t0;
	s->prof.nmap++;
	return GI_OK;
}

/*
 * Room for `keys` more keys, in one resize, when the allocation succeeds
 * and, under a memory limit, the bigger map fits together with every slab
 * the batch could need (a new slab per record's list and one per 32
 * records beyond the slabs in use); otherwise nothing happens and the map
 * grows record by record, so that the limit or an allocation failure
 * strikes at the record that needs the growth, as in the host store.
 */
gi_status
gi_cu_map_reserve(gi_store *s, uint64_t keys)
{
	uint64_t	want = s->map_count + keys;
	uint64_t	cap = s->map_cap;

	if (want * 3 <= cap * 2)
		return GI_OK;
	while (want * 3 > cap * 2)
		cap *= 2;
	if (s->params.memory_limit != 0)
	{
		uint64_t	lists = keys < s->params.nlists ? keys : s->params.nlists;
		uint64_t	slabs = s->slabs_used + keys / GI_SLAB_RECORDS + lists + 1;

		if (slabs < s->nslabs)
			slabs = s->nslabs;
		if (gi_cu_bytes_for(s, slabs, cap) > s->params.memory_limit)
			return GI_OK;
	}
	(void) gi_cu_map_resize(s, cap);
	return GI_OK;
}

/*
 * Keys a batch of n records may add, for gi_cu_map_reserve: n, except for
 * posting lists, where a row's records usually come together: the number
 * of runs of equal keys.
 */
uint64_t
gi_cu_batch_keys(const gi_store *s, const uint64_t *keys, uint32_t n)
{
	uint64_t	runs = n > 0;
	uint32_t	i;

	if (s->params.key_mode != GI_KEYS_PER_LIST)
		return n;
	for (i = 1; i < n; i++)
		runs += keys[i] != keys[i - 1];
	return runs;
}

gi_status
gi_cu_maps_init(gi_store *s)
{
	gi_status	st;

	s->map_cap = 0;
	gi_pairs_init(&s->pairs, NULL);
	st = gi_cu_map_resize(s, GI_CU_MAP_INITIAL);
	return st;
}
