/*
 * gi_spread.h
 *		Spreading one store's records over several stores (shards, one per
 *		device) and merging their answers into the one store's answer.
 *
 * Plain C, shared by the device service (src/service/gi_shards.c), the
 * search in parts of the access methods (src/access/gi_parts.c) and the
 * unit tests.  Records go to a shard either by their key (every record of
 * a key on one shard, so that a key's score is complete there) or by
 * their list (every record of a list on one shard); a search on every
 * shard with the same parameters, merged by (distance, key), is then the
 * search of the one store.
 */
#ifndef GI_SPREAD_H
#define GI_SPREAD_H

#include <math.h>
#include <string.h>

#include "gi_backend.h"

#ifdef __cplusplus
extern "C"
{
#endif

/* a shard number that means "any shard may hold it": ask each one */
#define GI_SHARD_ALL UINT32_MAX

/* a 32-bit hash of a key (every bit of the key moves every bit of it) */
static inline uint32_t
gi_key_hash(uint64_t key)
{
	uint64_t	h = key;

	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return (uint32_t) h;
}

/*
 * The shard of nshards a key's records go to when a kind spreads by key.
 * From the hash's high bits, so that it stays independent of a split
 * into parts by its low bits (gi_parts.c: hash % nparts).
 */
static inline uint32_t
gi_key_shard(uint64_t key, uint32_t nshards)
{
	return (uint32_t) (((uint64_t) gi_key_hash(key) * nshards) >> 32);
}

/*
 * The shard of nshards a list's records go to when a kind spreads by
 * list: owner[list] once set (GI_NIL: not yet), else the shard that was
 * given the fewest records so far (the lowest such), which becomes its
 * owner.  records[nshards] counts the records routed to each shard; the
 * record being routed is counted.  Loads walk the lists one after the
 * other, so each list is placed once the lists before it are counted:
 * greedy balance by list size.
 */
static inline uint32_t
gi_list_shard(uint32_t *owner, uint64_t *records, uint32_t nshards, uint32_t list)
{
	uint32_t	s = owner[list];

	if (s == GI_NIL)
	{
		s = 0;
		for (uint32_t i = 1; i < nshards; i++)
			if (records[i] < records[s])
				s = i;
		owner[list] = s;
	}
	records[s]++;
	return s;
}

/*
 * Merge a second answer to the same nq queries into a first, query by
 * query: hits[q * k ...] holds found[q] hits and more[q * k ...]
 * more_found[q], each in ascending gi_hit_order; afterwards hits holds
 * the first min(k, found + more_found) of their union and found[q] their
 * number.  tmp has room for k hits.  Slots past found[q] are left as they
 * were (gi_hits_pad).
 */
static inline void
gi_hits_merge(gi_hit *hits, uint32_t *found, const gi_hit *more,
			  const uint32_t *more_found, uint32_t nq, uint32_t k, gi_hit *tmp)
{
	for (uint32_t q = 0; q < nq; q++)
	{
		const gi_hit *a = hits + (size_t) q * k;
		const gi_hit *b = more + (size_t) q * k;
		uint32_t	na = found[q] < k ? found[q] : k;
		uint32_t	nb = more_found[q] < k ? more_found[q] : k;
		uint32_t	i = 0,
					j = 0,
					n = 0;

		while (n < k && (i < na || j < nb))
		{
			if (j >= nb || (i < na && gi_hit_order(&a[i], &b[j]) <= 0))
				tmp[n++] = a[i++];
			else
				tmp[n++] = b[j++];
		}
		memcpy(hits + (size_t) q * k, tmp, n * sizeof(gi_hit));
		found[q] = n;
	}
}

/* the slots past found[q] as a backend's search leaves them: key 0, +Inf */
static inline void
gi_hits_pad(gi_hit *hits, const uint32_t *found, uint32_t nq, uint32_t k)
{
	for (uint32_t q = 0; q < nq; q++)
		for (uint32_t i = found[q]; i < k; i++)
		{
			hits[(size_t) q * k + i].key = 0;
			hits[(size_t) q * k + i].distance = (float) INFINITY;
			hits[(size_t) q * k + i].pad = 0;
		}
}

#ifdef __cplusplus
}
#endif

#endif							/* GI_SPREAD_H */
