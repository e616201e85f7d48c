/*
 * gi_shards.h
 *		A store spread over the service's devices: one backend store per
 *		device (a shard), records routed by the store's kind, searches sent
 *		to every shard and their answers merged.
 *
 * A store of a kind that routes (GiServiceKind.route) has one shard on
 * each device; any other store, and a session's store of a part of an
 * index (multiple loading), has one shard, on the device it was given.
 * With one device every store has one shard and every call goes straight
 * to it.
 */
#ifndef GI_SHARDS_H
#define GI_SHARDS_H

#include "postgres.h"

#include "gi_kind.h"

/* one device's part of a store */
typedef struct GiShard
{
	int			device;			/* index in gi_devices */
	gi_store   *store;
} GiShard;

typedef struct GiShards
{
	uint32		kind;			/* gi_kind */
	const void *summary;		/* the kind's, owned by the store's entry */
	uint32		record_bytes;
	int			n;				/* shards; 0 until created */
	GiShard    *shard;
	GiShardMap	map;			/* routing, when n > 1 */
} GiShards;

/*
 * Create the shards of a store of kind (params->memory_limit: what all of
 * them together may hold; 0 = no limit), one per device when spread is
 * asked and the kind routes, else one on device `device`, and hand each
 * the kind's state.  On failure nothing is left created.
 */
extern gi_status gi_shards_create(GiShards *s, uint32 kind, const void *summary,
								  const gi_store_params *params, bool spread,
								  int device, const void *state, Size state_bytes);
extern void gi_shards_destroy(GiShards *s);

/*
 * store_insert and store_delete of gi_backend.h over the shards; budget
 * is what all shards together may hold (0 = no limit).  An insert calls
 * the kind's inserted hook with each shard's records.  A failure stops at
 * the shard that failed; the shards stay consistent.
 */
extern gi_status gi_shards_insert(GiShards *s, uint64 budget, uint32 n,
								  const uint32 *lists, const uint64 *keys,
								  const char *payloads, uint64 *ninserted);
extern gi_status gi_shards_delete(GiShards *s, uint32 n, const uint64 *keys,
								  uint64 *ndeleted);

/* the kind's search on every shard, merged into the one store's answer */
extern gi_status gi_shards_search(GiShards *s, const void *params, uint32 nq,
								  const void *queries, Size query_bytes, uint32 k,
								  gi_hit *hits, uint32 *found);

/*
 * A search in two halves (the kind's search_start and search_finish): where
 * the store has one shard and its kind has them (gi_shards_can_start), the
 * device searches between the two calls; elsewhere gi_shards_search_start
 * does the whole search and gi_shards_search_finish has nothing to wait for
 * (gi_shards_search_done: whether the finish would return at once).
 * After a start that returned GI_OK, the finish comes before any other call
 * on the store.
 */
extern bool gi_shards_can_start(const GiShards *s);
extern gi_status gi_shards_search_start(GiShards *s, const void *params, uint32 nq,
										const void *queries, Size query_bytes, uint32 k,
										gi_hit *hits, uint32 *found);
extern bool gi_shards_search_done(GiShards *s);
extern gi_status gi_shards_search_finish(GiShards *s);

/* the kind's stage timing (optional entries): on every shard, summed */
extern bool gi_shards_can_time(const GiShards *s);
extern void gi_shards_time_stages(GiShards *s, bool on);
extern uint32 gi_shards_last_stages(GiShards *s, gi_stage_time *out, uint32 max);

/* statistics of one shard, and of all summed (lists: each shard's) */
extern bool gi_shard_stats(const GiShard *sh, gi_store_stats *out);
extern void gi_shards_stats(const GiShards *s, gi_store_stats *out);
extern uint64 gi_shards_bytes(const GiShards *s);

#endif							/* GI_SHARDS_H */
