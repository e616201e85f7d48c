/*
 * gi_search.c
 *		Searches of one store, merged into as few backend calls as their
 *		parameters allow.
 *
 * The store's kind checks each request and gives it a grouping key;
 * requests with the same k and key become one call of the backend's
 * search for that kind over their concatenated queries.  That is how many
 * single-row "ORDER BY ... LIMIT k" scans from different sessions reach
 * the device as one batched kernel launch.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "gi_device.h"
#include "gi_kind.h"
#include "gi_store_requests.h"

static GiKindSearch
kind_search(GiWork *w)
{
	GiKindSearch ks;

	ks.args = &w->slot->args;
	ks.queries = w->buf;
	ks.query_bytes = w->slot->in_size;
	return ks;
}

/* generic checks, then the kind's; false after answering */
static bool
search_ok(GiStoreEntry *e, const GiServiceKind *kind, GiWork *w)
{
	GiSlot	   *slot = w->slot;
	GiKindSearch ks = kind_search(w);
	char		err[GI_ERRMSG_LEN];
	int			sqlstate;
	uint64		hits;

	if (slot->args.kind != e->kind)
	{
		const GiServiceKind *asked = gi_kind_get(slot->args.kind);

		gi_reply_error(w, ERRCODE_WRONG_OBJECT_TYPE,
					   "gpuindex search of a %s store, but the index's store is %s",
					   asked ? asked->name : "unknown", kind->name);
		return false;
	}
	hits = (uint64) slot->args.n * slot->args.k;
	if (slot->args.k < 1 || hits > MaxAllocHugeSize / sizeof(gi_hit))
	{
		gi_reply_error(w, ERRCODE_INVALID_PARAMETER_VALUE,
					   "gpuindex search of %u queries for %u rows each", slot->args.n,
					   slot->args.k);
		return false;
	}
	sqlstate = kind->check_search(e->summary, &ks, &w->group, err, sizeof(err));
	if (sqlstate != 0)
	{
		gi_reply_error(w, sqlstate, "%s", err);
		return false;
	}
	if (gi_search_out_size(slot->args.n, slot->args.k) > slot->capacity)
	{
		slot->rargs.out_needed = gi_search_out_size(slot->args.n, slot->args.k);
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return false;
	}
	return true;
}

static int
cmp_search(const void *a, const void *b)
{
	const GiWork *x = *(GiWork *const *) a;
	const GiWork *y = *(GiWork *const *) b;

	if (x->slot->args.k != y->slot->args.k)
		return x->slot->args.k < y->slot->args.k ? -1 : 1;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return 0;
}

/* one backend search over the queries of group[0..n), all alike */
static void
search_merged(GiStoreEntry *e, const GiServiceKind *kind, GiWork **group, int n)
{
	uint32		k = group[0]->slot->args.k;
	GiKindSearch *reqs = palloc(sizeof(GiKindSearch) * n);
	union
	{
		char		bytes[GI_KARGS_BYTES];
		uint64		align;
	}			params;
	const void *queries;
	Size		query_bytes;
	uint64		nq = 0;
	uint64		pos = 0;
	gi_hit	   *hits;
	uint32	   *found;
	gi_status	st;

	for (int i = 0; i < n; i++)
	{
		reqs[i] = kind_search(group[i]);
		nq += group[i]->slot->args.n;
	}
	if (nq == 0 || nq > PG_UINT32_MAX)
	{
		for (int i = 0; i < n; i++)
		{
			if (nq == 0)
			{
				group[i]->slot->rargs.out_size = 0;
				gi_reply(group[i], GI_REPLY_OK);
			}
			else
				gi_reply_error(group[i], ERRCODE_PROGRAM_LIMIT_EXCEEDED,
							   "gpuindex search round of too many queries");
		}
		return;
	}

	memset(&params, 0, sizeof(params));
	queries = kind->merge_search(e->summary, reqs, n, params.bytes, &query_bytes);
	hits = palloc_extended(nq * k * sizeof(gi_hit), MCXT_ALLOC_HUGE);
	found = palloc_extended(nq * sizeof(uint32), MCXT_ALLOC_HUGE);

	st = gi_ops->kinds[e->kind]->search(e->store, params.bytes, (uint32) nq,
										queries, query_bytes, k, hits, found);
	e->search_batches++;
	e->searches += nq;

	for (int i = 0; i < n; i++)
	{
		GiWork	   *w = group[i];
		uint32		wn = w->slot->args.n;

		if (st != GI_OK)
		{
			gi_reply_status(w, st);
			continue;
		}
		memcpy(w->buf, hits + pos * k, (Size) wn * k * sizeof(gi_hit));
		memcpy(gi_search_found(w->buf, wn, k), found + pos, wn * sizeof(uint32));
		pos += wn;
		w->slot->rargs.count = wn;
		w->slot->rargs.out_size = gi_search_out_size(wn, k);
		gi_reply(w, GI_REPLY_OK);
	}
}

void
gi_search_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	const GiServiceKind *kind = gi_kind_get(e->kind);
	int			nvalid = 0;

	if (kind == NULL)
		elog(ERROR, "gpuindex store of unknown kind %u", e->kind);
	for (int i = 0; i < ngroup; i++)
		if (search_ok(e, kind, group[i]))
			group[nvalid++] = group[i];

	qsort(group, nvalid, sizeof(GiWork *), cmp_search);
	for (int i = 0; i < nvalid;)
	{
		int			j = i + 1;

		while (j < nvalid && cmp_search(&group[i], &group[j]) == 0)
			j++;
		search_merged(e, kind, group + i, j - i);
		i = j;
	}
}
