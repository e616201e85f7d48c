/*
 * gi_kind.c
 *		The registry of store kinds the device service knows, and the
 *		routings the kinds choose from.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "gi_kind.h"

static const GiServiceKind *gi_kinds[GI_KIND_COUNT];

void
gi_kind_register(const GiServiceKind *kind)
{
	if (kind->kind <= GI_KIND_NONE || kind->kind >= GI_KIND_COUNT)
		elog(ERROR, "gpuindex store kind \"%s\" has number %d, out of range",
			 kind->name, (int) kind->kind);
	gi_kinds[kind->kind] = kind;
}

const GiServiceKind *
gi_kind_get(uint32 kind)
{
	return kind < GI_KIND_COUNT ? gi_kinds[kind] : NULL;
}

MemoryContext
gi_kind_data_cxt(GiKindData *kd)
{
	if (kd->cxt == NULL)
		kd->cxt = AllocSetContextCreate(TopMemoryContext, "gpuindex kind data",
										ALLOCSET_DEFAULT_SIZES);
	return kd->cxt;
}

const void *
gi_kind_concat_queries(const GiKindSearch *reqs, int n, Size *query_bytes)
{
	Size		total = 0;
	char	   *queries;

	for (int i = 0; i < n; i++)
		total += reqs[i].query_bytes;
	*query_bytes = total;
	if (n == 1)
		return reqs[0].queries;

	queries = palloc_extended(Max(total, 1), MCXT_ALLOC_HUGE);
	total = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(queries + total, reqs[i].queries, reqs[i].query_bytes);
		total += reqs[i].query_bytes;
	}
	return queries;
}

void
gi_route_by_list(GiShardMap *map, uint32 n, const uint32 *lists, uint32 *shards)
{
	if (lists == NULL)
	{
		for (uint32 i = 0; i < n; i++)
			shards[i] = GI_SHARD_ALL;
		return;
	}
	if (map->list_owner == NULL)
	{
		map->list_owner = MemoryContextAllocHuge(TopMemoryContext,
												 (Size) map->nlists * sizeof(uint32));
		memset(map->list_owner, 0xFF, (Size) map->nlists * sizeof(uint32));
	}
	for (uint32 i = 0; i < n; i++)
		shards[i] = gi_list_shard(map->list_owner, map->records, map->nshards, lists[i]);
}

void
gi_route_by_key(GiShardMap *map, uint32 n, const uint64 *keys, uint32 *shards)
{
	for (uint32 i = 0; i < n; i++)
		shards[i] = gi_key_shard(keys[i], map->nshards);
}
