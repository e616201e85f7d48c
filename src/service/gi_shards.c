/*
 * gi_shards.c
 *		A store spread over the service's devices: creating its shards,
 *		routing its writes, fanning its searches out and merging the
 *		answers.
 *
 * The store's kind decides where a record goes (GiServiceKind.route):
 * IVF kinds keep each list whole on one shard, posting kinds each key.
 * Either way a search on every shard with the same parameters, merged by
 * (distance, key), is the search of one store holding every record
 * (docs/architecture.md, "Several devices").  A delete goes to the shard
 * the kind names, or to every shard when the kind cannot tell from the key
 * alone; a shard ignores keys it does not hold.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "gi_device.h"
#include "gi_shards.h"
#include "host_pool.h"

/* queries of a search from which the shards search at the same time */
#define GI_SHARDS_PARALLEL_MIN	16

/* what the tasks of one search fanned out to the shards share */
typedef struct ShardSearchJob
{
	const gi_kind_ops *kops;
	const GiShards *s;
	const void *params;
	uint32		nq;
	const void *queries;
	Size		query_bytes;
	uint32		k;
	gi_hit	  **hits;			/* per shard */
	uint32	  **found;			/* per shard */
	gi_status  *st;				/* per shard */
} ShardSearchJob;

static const gi_kind_ops *
kind_ops(const GiShards *s)
{
	return gi_ops->kinds[s->kind];
}

bool
gi_shard_stats(const GiShard *sh, gi_store_stats *out)
{
	memset(out, 0, sizeof(*out));
	return sh->store != NULL && gi_ops->store_stats(sh->store, out) == GI_OK;
}

void
gi_shards_stats(const GiShards *s, gi_store_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (int j = 0; j < s->n; j++)
	{
		gi_store_stats st;

		if (!gi_shard_stats(&s->shard[j], &st))
			continue;
		out->lists = Max(out->lists, st.lists);
		out->rows += st.rows;
		out->keys += st.keys;
		out->slabs_used += st.slabs_used;
		out->slabs_free += st.slabs_free;
		out->slabs_total += st.slabs_total;
		out->bytes += st.bytes;
		out->payload_bytes += st.payload_bytes;
		out->inserts += st.inserts;
		out->deletes += st.deletes;
	}
}

uint64
gi_shards_bytes(const GiShards *s)
{
	uint64		bytes = 0;

	for (int j = 0; j < s->n; j++)
	{
		gi_store_stats st;

		if (gi_shard_stats(&s->shard[j], &st))
			bytes += st.bytes;
	}
	return bytes;
}

/*
 * The limit of shard j when all shards together may hold budget bytes: its
 * own bytes and what the others leave (never 0, which means no limit).
 */
static uint64
shard_limit(const GiShards *s, int j, uint64 budget)
{
	uint64		total;
	gi_store_stats st;

	if (budget == 0 || s->n == 1)
		return budget;
	total = gi_shards_bytes(s);
	(void) gi_shard_stats(&s->shard[j], &st);
	return Max(st.bytes + (budget > total ? budget - total : 0), 1);
}

void
gi_shards_destroy(GiShards *s)
{
	for (int j = 0; j < s->n; j++)
		if (s->shard[j].store != NULL)
			gi_ops->store_destroy(s->shard[j].store);
	if (s->shard)
		pfree(s->shard);
	if (s->map.list_owner)
		pfree(s->map.list_owner);
	if (s->map.records)
		pfree(s->map.records);
	memset(s, 0, sizeof(*s));
}

gi_status
gi_shards_create(GiShards *s, uint32 kind, const void *summary,
				 const gi_store_params *params, bool spread, int device,
				 const void *state, Size state_bytes)
{
	const GiServiceKind *sk = gi_kind_get(kind);
	int			n = (spread && sk != NULL && sk->route != NULL) ? gi_ndevices : 1;

	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->summary = summary;
	s->record_bytes = params->record_bytes;
	s->shard = MemoryContextAllocZero(TopMemoryContext, sizeof(GiShard) * n);
	s->map.nshards = n;
	s->map.nlists = params->nlists;
	s->map.records = MemoryContextAllocZero(TopMemoryContext, sizeof(uint64) * n);
	for (int j = 0; j < n; j++)
	{
		GiShard    *sh = &s->shard[j];
		gi_store_params p = *params;
		gi_status	st;

		sh->device = n == 1 ? device : j;
		p.device = gi_devices[sh->device].dev;
		if (p.memory_limit != 0 && j > 0)
		{
			uint64		used = gi_shards_bytes(s);

			p.memory_limit = Max(p.memory_limit > used ? p.memory_limit - used : 0, 1);
		}
		s->n = j + 1;
		st = gi_ops->store_create(&p, &sh->store);
		if (st == GI_OK && kind_ops(s)->set_state)
			st = kind_ops(s)->set_state(sh->store, state, state_bytes);
		if (st != GI_OK)
		{
			gi_shards_destroy(s);
			return st;
		}
	}
	return GI_OK;
}

/* the shard of each of n records (lists NULL: of keys to delete) */
static uint32 *
route(GiShards *s, uint32 n, const uint64 *keys, const uint32 *lists)
{
	uint32	   *shards = palloc_extended(Max((Size) n, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);

	gi_kind_get(s->kind)->route(s->summary, &s->map, n, keys, lists, shards);
	for (uint32 i = 0; i < n; i++)
		if (shards[i] >= (uint32) s->n && !(lists == NULL && shards[i] == GI_SHARD_ALL))
			elog(ERROR, "gpuindex store kind %u routed a record to shard %u of %d",
				 s->kind, shards[i], s->n);
	return shards;
}

static gi_status
insert_shard(GiShards *s, int j, uint64 budget, uint32 n, const uint32 *lists,
			 const uint64 *keys, const char *payloads, uint64 *ninserted)
{
	gi_store   *store = s->shard[j].store;
	uint64		done = 0;
	gi_status	st;

	if (gi_ops->store_set_limit)
		gi_ops->store_set_limit(store, shard_limit(s, j, budget));
	st = gi_ops->store_insert(store, n, lists, keys, payloads, &done);
	/* also after a failure: the records before it stay inserted */
	if (kind_ops(s)->inserted != NULL)
		kind_ops(s)->inserted(store, n, lists, payloads);
	*ninserted += done;
	return st;
}

gi_status
gi_shards_insert(GiShards *s, uint64 budget, uint32 n, const uint32 *lists,
				 const uint64 *keys, const char *payloads, uint64 *ninserted)
{
	Size		rb;
	uint32	   *shards;
	uint32	   *start;
	uint32	   *next;
	uint64	   *skeys;
	uint32	   *slists;
	char	   *spay;
	gi_status	st = GI_OK;

	*ninserted = 0;
	if (s->n == 1)
		return insert_shard(s, 0, budget, n, lists, keys, payloads, ninserted);

	/* each shard's records together, in their order (the first of repeats wins) */
	shards = route(s, n, keys, lists);
	start = palloc0(sizeof(uint32) * (s->n + 1));
	next = palloc(sizeof(uint32) * s->n);
	for (uint32 i = 0; i < n; i++)
		start[shards[i] + 1]++;
	for (int j = 0; j < s->n; j++)
	{
		start[j + 1] += start[j];
		next[j] = start[j];
	}
	rb = s->record_bytes;
	skeys = palloc_extended(Max((Size) n, 1) * sizeof(uint64), MCXT_ALLOC_HUGE);
	slists = palloc_extended(Max((Size) n, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	spay = palloc_extended(Max((Size) n * rb, 1), MCXT_ALLOC_HUGE);
	for (uint32 i = 0; i < n; i++)
	{
		uint32		p = next[shards[i]]++;

		skeys[p] = keys[i];
		slists[p] = lists[i];
		memcpy(spay + (Size) p * rb, payloads + (Size) i * rb, rb);
	}
	for (int j = 0; j < s->n && st == GI_OK; j++)
		if (start[j + 1] > start[j])
			st = insert_shard(s, j, budget, start[j + 1] - start[j], slists + start[j],
							  skeys + start[j], spay + (Size) start[j] * rb, ninserted);
	pfree(shards);
	pfree(start);
	pfree(next);
	pfree(skeys);
	pfree(slists);
	pfree(spay);
	return st;
}

gi_status
gi_shards_delete(GiShards *s, uint32 n, const uint64 *keys, uint64 *ndeleted)
{
	uint32	   *shards;
	uint64	   *mine;
	bool		everywhere = true;
	gi_status	st = GI_OK;

	*ndeleted = 0;
	if (s->n == 1)
		return gi_ops->store_delete(s->shard[0].store, n, keys, ndeleted);

	shards = route(s, n, keys, NULL);
	for (uint32 i = 0; i < n && everywhere; i++)
		everywhere = shards[i] == GI_SHARD_ALL;
	mine = everywhere ? NULL :
		palloc_extended(Max((Size) n, 1) * sizeof(uint64), MCXT_ALLOC_HUGE);
	for (int j = 0; j < s->n && st == GI_OK; j++)
	{
		const uint64 *these = keys;
		uint32		m = n;
		uint64		done = 0;

		if (!everywhere)
		{
			m = 0;
			for (uint32 i = 0; i < n; i++)
				if (shards[i] == (uint32) j || shards[i] == GI_SHARD_ALL)
					mine[m++] = keys[i];
			these = mine;
		}
		if (m == 0)
			continue;
		st = gi_ops->store_delete(s->shard[j].store, m, these, &done);
		*ndeleted += done;
	}
	pfree(shards);
	if (mine)
		pfree(mine);
	return st;
}

/*
 * One shard's search into its own buffers (a task of the host backend's
 * pool, host_pool.h, so plain C).  Its status is kept, not returned, so that every shard runs;
 * the caller searches a failed shard again on its own thread, where the
 * backend's message belongs.
 */
static gi_status
shard_search_task(void *arg, uint32_t task, uint32_t worker)
{
	ShardSearchJob *j = arg;

	(void) worker;
	j->st[task] = j->kops->search(j->s->shard[task].store, j->params, j->nq, j->queries,
								  j->query_bytes, j->k, j->hits[task], j->found[task]);
	return GI_OK;
}

/*
 * Every shard's search, at the same time (together) or in turn on this
 * thread, then merged in shard order: the answer does not depend on which
 * shard finished first.  Host shards share the host backend's threads
 * (gpuindex.host_threads); shards on devices get a thread each whatever
 * that setting, since their threads wait for the device rather than use a
 * core (each device object sets its own device on entry).
 */
static gi_status
search_shards(GiShards *s, const void *params, uint32 nq, const void *queries,
			  Size query_bytes, uint32 k, gi_hit *hits, uint32 *found, bool together)
{
	ShardSearchJob j;
	gi_hit	   *tmp = palloc(sizeof(gi_hit) * Max(k, 1));
	gi_status	st = GI_OK;

	j.kops = kind_ops(s);
	j.s = s;
	j.params = params;
	j.nq = nq;
	j.queries = queries;
	j.query_bytes = query_bytes;
	j.k = k;
	j.hits = palloc(sizeof(gi_hit *) * s->n);
	j.found = palloc(sizeof(uint32 *) * s->n);
	j.st = palloc(sizeof(gi_status) * s->n);
	j.hits[0] = hits;
	j.found[0] = found;
	for (int i = 1; i < s->n; i++)
	{
		j.hits[i] = palloc_extended(Max((Size) nq * k * sizeof(gi_hit), 1), MCXT_ALLOC_HUGE);
		j.found[i] = palloc_extended(Max((Size) nq * sizeof(uint32), 1), MCXT_ALLOC_HUGE);
	}
	if (together && gi_ops == gi_host_backend())
		(void) gi_host_pool_run((uint32) s->n, (uint32) s->n, shard_search_task, &j);
	else if (together)
		(void) gi_host_pool_run_each((uint32) s->n, shard_search_task, &j);
	else
		for (int i = 0; i < s->n; i++)
			(void) shard_search_task(&j, (uint32) i, 0);
	for (int i = 0; i < s->n && st == GI_OK; i++)
	{
		if (j.st[i] != GI_OK)
			j.st[i] = j.kops->search(s->shard[i].store, params, nq, queries, query_bytes, k,
									 j.hits[i], j.found[i]);
		st = j.st[i];
		if (st == GI_OK && i > 0)
			gi_hits_merge(hits, found, j.hits[i], j.found[i], nq, k, tmp);
	}
	if (st == GI_OK)
		gi_hits_pad(hits, found, nq, k);
	for (int i = 1; i < s->n; i++)
	{
		pfree(j.hits[i]);
		pfree(j.found[i]);
	}
	pfree(j.hits);
	pfree(j.found);
	pfree(j.st);
	pfree(tmp);
	return st;
}

gi_status
gi_shards_search(GiShards *s, const void *params, uint32 nq, const void *queries,
				 Size query_bytes, uint32 k, gi_hit *hits, uint32 *found)
{
	if (s->n == 1)
		return kind_ops(s)->search(s->shard[0].store, params, nq, queries, query_bytes,
								   k, hits, found);
	return search_shards(s, params, nq, queries, query_bytes, k, hits, found,
						 nq >= GI_SHARDS_PARALLEL_MIN);
}

/* see gi_shards.h */
bool
gi_shards_can_start(const GiShards *s)
{
	return s->n == 1 && kind_ops(s)->search_start != NULL &&
		kind_ops(s)->search_finish != NULL;
}

gi_status
gi_shards_search_start(GiShards *s, const void *params, uint32 nq, const void *queries,
					   Size query_bytes, uint32 k, gi_hit *hits, uint32 *found)
{
	if (gi_shards_can_start(s))
		return kind_ops(s)->search_start(s->shard[0].store, params, nq, queries,
										 query_bytes, k, hits, found);
	return gi_shards_search(s, params, nq, queries, query_bytes, k, hits, found);
}

bool
gi_shards_search_done(GiShards *s)
{
	if (gi_shards_can_start(s) && kind_ops(s)->search_done != NULL)
		return kind_ops(s)->search_done(s->shard[0].store);
	return true;
}

gi_status
gi_shards_search_finish(GiShards *s)
{
	if (gi_shards_can_start(s))
		return kind_ops(s)->search_finish(s->shard[0].store);
	return GI_OK;
}

bool
gi_shards_can_time(const GiShards *s)
{
	return kind_ops(s)->time_stages != NULL && kind_ops(s)->last_stages != NULL;
}

void
gi_shards_time_stages(GiShards *s, bool on)
{
	for (int j = 0; j < s->n; j++)
		kind_ops(s)->time_stages(s->shard[j].store, on);
}

/* the first shard's stages, with the time of the others' same stages added */
uint32
gi_shards_last_stages(GiShards *s, gi_stage_time *out, uint32 max)
{
	uint32		n = kind_ops(s)->last_stages(s->shard[0].store, out, max);

	for (int j = 1; j < s->n; j++)
	{
		gi_stage_time more[GI_MAX_STAGES];
		uint32		m = kind_ops(s)->last_stages(s->shard[j].store, more,
												 Min(max, GI_MAX_STAGES));

		for (uint32 i = 0; i < Min(n, m); i++)
			if (strcmp(out[i].name, more[i].name) == 0)
				out[i].us += more[i].us;
	}
	return n;
}
