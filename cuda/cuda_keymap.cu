/*
 * cuda_keymap.cu
 *		The key -> rows map of the CUDA store, kept on the host side.
 *
 * The device service calls a store from one thread, serially, so the map
 * needs no device copy: a delete looks its key up here in O(1), walks the
 * key's own rows (row_next chain) and hands the row ids to the device,
 * which finds each row's slot through the device ATT.  The map is the host
 * store's (src/store/host_store.c): open addressing, linear probing,
 * backward-shift deletion (no tombstones), load factor at most 2/3, the
 * murmur3 finalizer as hash.  Same growth steps as the host store, so the
 * two backends reach the memory limit at the same record.
 */
#include <cstdlib>
#include <cstring>

#include "cuda_store.h"
#include "cuda_util.cuh"

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

uint64_t
gi_cu_map_find(const gi_store *s, uint64_t key)
{
	uint64_t	mask = s->map_cap - 1;
	uint64_t	i = gi_cu_hash(key) & mask;

	while (s->map_rows[i] != GI_NIL)
	{
		if (s->map_keys[i] == key)
			return i;
		i = (i + 1) & mask;
	}
	return GI_CU_MAP_NONE;
}

/*
 * Planning touches one random map slot per record: a cache miss on a map
 * of millions of keys.  The batch loops prefetch the slot of the record a
 * few places ahead so that the misses overlap.
 */
void
gi_cu_map_prefetch(const gi_store *s, uint64_t key)
{
	uint64_t	i = gi_cu_hash(key) & (s->map_cap - 1);

	__builtin_prefetch(&s->map_rows[i]);
	__builtin_prefetch(&s->map_keys[i]);
}

void
gi_cu_map_put(uint64_t *keys, uint32_t *rows, uint64_t cap, uint64_t key,
			  uint32_t row)
{
	uint64_t	mask = cap - 1;
	uint64_t	i = gi_cu_hash(key) & mask;

	while (rows[i] != GI_NIL)
		i = (i + 1) & mask;
	keys[i] = key;
	rows[i] = row;
}

void
gi_cu_map_remove(gi_store *s, uint64_t i)
{
	uint64_t	mask = s->map_cap - 1;
	uint64_t	j = i;

	for (;;)
	{
		uint64_t	home;

		j = (j + 1) & mask;
		if (s->map_rows[j] == GI_NIL)
			break;
		home = gi_cu_hash(s->map_keys[j]) & mask;
		if (((j - home) & mask) >= ((j - i) & mask))
		{
			s->map_keys[i] = s->map_keys[j];
			s->map_rows[i] = s->map_rows[j];
			i = j;
		}
	}
	s->map_rows[i] = GI_NIL;
	s->map_count--;
}

bool
gi_cu_map_has_room(const gi_store *s)
{
	return (s->map_count + 1) * 3 <= s->map_cap * 2;
}

gi_status
gi_cu_map_resize(gi_store *s, uint64_t newcap)
{
	uint64_t   *keys;
	uint32_t   *rows;
	uint64_t	need = gi_cu_bytes_for(s, s->nslabs, newcap);
	uint64_t	i;

	if (s->params.memory_limit != 0 && need > s->params.memory_limit)
		return gi_cu_limit_error(s, need);
	if (newcap > SIZE_MAX / sizeof(uint64_t))
	{
		gi_cu_set_error("key map of %llu entries is too large",
						(unsigned long long) newcap);
		return GI_ERR_NOMEM;
	}
	keys = (uint64_t *) malloc(newcap * sizeof(uint64_t));
	rows = keys ? (uint32_t *) malloc(newcap * sizeof(uint32_t)) : NULL;
	if (rows == NULL)
	{
		free(keys);
		gi_cu_set_error("out of memory growing the key map to %llu entries",
						(unsigned long long) newcap);
		return GI_ERR_NOMEM;
	}
	memset(keys, 0, newcap * sizeof(uint64_t));
	memset(rows, 0xFF, newcap * sizeof(uint32_t));
	for (i = 0; i < s->map_cap; i++)
		if (s->map_rows[i] != GI_NIL)
			gi_cu_map_put(keys, rows, newcap, s->map_keys[i], s->map_rows[i]);
	free(s->map_keys);
	free(s->map_rows);
	s->map_keys = keys;
	s->map_rows = rows;
	s->map_cap = newcap;
	return GI_OK;
}
