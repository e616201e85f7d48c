/*
 * gi_dispatch.c
 *		Answering one round of requests inside the device service.
 *
 * Requests of one kind on one store are merged: all searches on an index
 * with the same k and probes become one backend search call over the
 * concatenated queries; inserts and deletes likewise.  That is how many
 * single-row "ORDER BY ... LIMIT k" scans from different sessions reach
 * the device as one batched kernel launch.  Store mutations of a round
 * are applied before its searches.
 *
 * Loading (after a restart, or when a backend first touches an index): a
 * backend sends LOAD_BEGIN with the centroids, streams the records it
 * reads from the index pages in LOAD_CHUNKs, then LOAD_END.  Inserts and
 * deletes from other backends keep flowing meanwhile and are applied to
 * the half-loaded store; deleted keys are remembered as tombstones until
 * LOAD_END so that a chunk read from a page before the delete cannot bring
 * a row back, and the store's unique keys make a chunk that repeats an
 * insert harmless.  Since backends always write pages before they tell the
 * service, and the loader sends LOAD_BEGIN before reading any list page,
 * the loaded store equals the pages.
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gi_service.h"

/* a load whose loader has been silent this long may be taken over */
#define GI_LOAD_STALE_MS	5000

static uint64 gi_next_load_token = 1;

void
gi_reply(GiWork *w, GiReply reply)
{
	w->slot->reply = reply;
	w->answered = true;
}

void
gi_reply_error(GiWork *w, int sqlstate, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(w->slot->rargs.errmsg, GI_ERRMSG_LEN, fmt, ap);
	va_end(ap);
	w->slot->rargs.sqlstate = sqlstate;
	w->slot->reply = GI_REPLY_ERROR;
	w->answered = true;
}

static void
reply_backend_error(GiWork *w, gi_status st)
{
	int			sqlstate;

	switch (st)
	{
		case GI_ERR_LIMIT:
			sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
			break;
		case GI_ERR_NOMEM:
			sqlstate = ERRCODE_OUT_OF_MEMORY;
			break;
		case GI_ERR_INVALID:
			sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
		case GI_ERR_UNSUPPORTED:
			sqlstate = ERRCODE_FEATURE_NOT_SUPPORTED;
			break;
		default:
			sqlstate = ERRCODE_SYSTEM_ERROR;
			break;
	}
	gi_reply_error(w, sqlstate, "gpuindex %s backend: %s",
				   gi_ops->name, gi_ops->last_error());
}

/* the backend is missing (gpuindex.device = cuda without a GPU) */
static bool
check_ops(GiWork *w)
{
	if (gi_ops)
		return true;
	gi_reply_error(w, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
				   "gpuindex has no usable compute backend: %s", gi_ops_unavailable);
	return false;
}

/* the store a request may use: present, of the same pages */
static GiStoreEntry *
store_for(GiWork *w)
{
	GiStoreEntry *e = gi_store_lookup(&w->slot->key);

	if (e && e->relfilenode != w->slot->args.relfilenode)
		return NULL;
	return e;
}

/* ---- simple requests ---- */

static void
handle_service_info(GiWork *w)
{
	GiServiceInfo *info = (GiServiceInfo *) w->buf;

	if (w->slot->capacity < sizeof(GiServiceInfo))
	{
		w->slot->rargs.out_needed = sizeof(GiServiceInfo);
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return;
	}
	memset(info, 0, sizeof(*info));
	info->pid = MyProcPid;
	SpinLockAcquire(&gi_shared->mutex);
	info->generation = gi_shared->generation;
	SpinLockRelease(&gi_shared->mutex);
	strlcpy(info->backend, gi_ops ? gi_ops->name : "none", sizeof(info->backend));
	strlcpy(info->device_name, gi_ops ? gi_ops->device_name() : gi_ops_unavailable,
			sizeof(info->device_name));
	info->requests = gi_requests_total;
	info->rounds = gi_rounds_total;
	info->stores = gi_store_count();
	info->bytes = gi_ops ? gi_stores_bytes() : 0;
	memcpy(info->requests_by_type, gi_requests_by_type, sizeof(info->requests_by_type));
	w->slot->rargs.out_size = sizeof(GiServiceInfo);
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_stats(GiWork *w)
{
	Size		need = gi_store_count() * sizeof(GiStoreStatRow);
	GiStoreStatRow *row = (GiStoreStatRow *) w->buf;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;

	if (need > w->slot->capacity)
	{
		w->slot->rargs.out_needed = need;
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return;
	}
	gi_stores_seq_init(&status);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		memset(row, 0, sizeof(*row));
		row->key = e->key;
		row->relfilenode = e->relfilenode;
		row->kind = e->kind;
		row->ready = e->ready;
		strlcpy(row->backend, gi_ops->name, sizeof(row->backend));
		row->dim = e->dim;
		row->metric = e->metric;
		if (e->store)
			(void) gi_ops->store_stats(e->store, &row->st);
		row->searches = e->searches;
		row->search_batches = e->search_batches;
		row->insert_requests = e->insert_requests;
		row->insert_batches = e->insert_batches;
		row->delete_requests = e->delete_requests;
		row->delete_batches = e->delete_batches;
		row->loads = e->loads;
		row++;
	}
	w->slot->rargs.count = gi_store_count();
	w->slot->rargs.out_size = need;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_drop(GiWork *w)
{
	GiStoreEntry *e = gi_store_lookup(&w->slot->key);

	if (e)
		gi_store_remove(e);
	gi_reply(w, GI_REPLY_OK);
}

/* ---- loading ---- */

static bool
loader_alive(GiStoreEntry *e)
{
	if (e->loader_pid == 0 || kill(e->loader_pid, 0) != 0)
		return false;
	return !TimestampDifferenceExceeds(e->load_activity, GetCurrentTimestamp(),
									   GI_LOAD_STALE_MS);
}

static void
handle_load_begin(GiWork *w)
{
	GiSlot	   *slot = w->slot;
	GiReqArgs  *a = &slot->args;
	GiStoreEntry *e;
	bool		found;
	gi_store_params params;
	gi_status	st;
	Size		csize = (Size) a->nlists * a->dim * sizeof(float);

	if (a->kind != GI_KIND_IVF_FLAT || a->nlists == 0 || a->dim == 0 ||
		a->record_bytes != a->dim * sizeof(float) || slot->in_size != csize)
	{
		gi_reply_error(w, ERRCODE_INVALID_PARAMETER_VALUE,
					   "malformed gpuindex load request");
		return;
	}

	e = gi_store_enter(&slot->key, &found);
	if (found && e->relfilenode == a->relfilenode)
	{
		if (e->ready)
		{
			gi_reply(w, GI_REPLY_ALREADY_LOADED);
			return;
		}
		if (e->loader_pid != slot->pid && loader_alive(e))
		{
			gi_reply(w, GI_REPLY_BUSY);
			return;
		}
	}
	if (found)
	{
		/* stale pages (REINDEX, TRUNCATE), an abandoned load, or a reload */
		gi_store_remove(e);
		e = gi_store_enter(&slot->key, &found);
	}

	memset(&params, 0, sizeof(params));
	params.nlists = a->nlists;
	params.record_bytes = a->record_bytes;
	params.unique_keys = true;
	params.memory_limit = gi_store_budget(e);
	st = gi_ops->store_create(&params, &e->store);
	if (st != GI_OK)
	{
		reply_backend_error(w, st);
		gi_store_remove(e);
		return;
	}
	e->relfilenode = a->relfilenode;
	e->kind = a->kind;
	e->nlists = a->nlists;
	e->dim = a->dim;
	e->metric = a->metric;
	e->record_bytes = a->record_bytes;
	e->centroids = MemoryContextAllocHuge(TopMemoryContext, csize);
	memcpy(e->centroids, w->buf, csize);
	e->ready = false;
	e->load_token = gi_next_load_token++;
	e->loader_pid = slot->pid;
	e->load_activity = GetCurrentTimestamp();

	slot->rargs.load_token = e->load_token;
	gi_reply(w, GI_REPLY_OK);
}

/* the entry a chunk or end belongs to, or NULL after answering BUSY */
static GiStoreEntry *
load_entry(GiWork *w)
{
	GiStoreEntry *e = store_for(w);

	if (e == NULL || e->ready || e->load_token != w->slot->args.load_token)
	{
		/* taken over or dropped: the loader starts again */
		gi_reply(w, GI_REPLY_BUSY);
		return NULL;
	}
	e->load_activity = GetCurrentTimestamp();
	return e;
}

static void
handle_load_end(GiWork *w)
{
	GiStoreEntry *e = load_entry(w);

	if (e == NULL)
		return;
	e->ready = true;
	e->loader_pid = 0;
	e->loads++;
	if (e->tombstones)
	{
		hash_destroy(e->tombstones);
		e->tombstones = NULL;
	}
	gi_reply(w, GI_REPLY_OK);
}

/* ---- mutations, merged per store ---- */

static bool
records_ok(GiWork *w, GiStoreEntry *e)
{
	if (w->slot->in_size != gi_records_size(w->slot->args.n, e->record_bytes))
	{
		gi_reply_error(w, ERRCODE_INVALID_PARAMETER_VALUE,
					   "malformed gpuindex insert request");
		return false;
	}
	for (uint32 i = 0; i < w->slot->args.n; i++)
		if (gi_records_lists(w->buf, w->slot->args.n)[i] >= e->nlists)
		{
			gi_reply_error(w, ERRCODE_INVALID_PARAMETER_VALUE,
						   "gpuindex insert names list %u of %u",
						   gi_records_lists(w->buf, w->slot->args.n)[i], e->nlists);
			return false;
		}
	return true;
}

/*
 * Insert the records of the given requests (inserts or load chunks of one
 * store) with one backend call.
 */
static void
insert_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	uint64		total = 0;
	uint64	   *keys;
	uint32	   *lists;
	char	   *payloads;
	uint64		pos = 0;
	uint64		ninserted = 0;
	gi_status	st;
	int			nvalid = 0;

	for (int i = 0; i < ngroup; i++)
	{
		if (!records_ok(group[i], e))
			continue;
		group[nvalid++] = group[i];
		total += group[i]->slot->args.n;
	}
	if (nvalid == 0)
		return;

	keys = palloc_extended(total * sizeof(uint64), MCXT_ALLOC_HUGE);
	lists = palloc_extended(total * sizeof(uint32), MCXT_ALLOC_HUGE);
	payloads = palloc_extended(total * e->record_bytes, MCXT_ALLOC_HUGE);
	for (int i = 0; i < nvalid; i++)
	{
		GiWork	   *w = group[i];
		uint32		n = w->slot->args.n;
		uint64	   *wkeys = gi_records_keys(w->buf);
		uint32	   *wlists = gi_records_lists(w->buf, n);
		char	   *wpay = gi_records_payloads(w->buf, n);

		for (uint32 j = 0; j < n; j++)
		{
			if (!e->ready)
			{
				/*
				 * While loading, a chunk must not revive a row deleted
				 * since its page was read; a fresh insert of the key (a
				 * reused TID) lifts the tombstone.
				 */
				if (w->slot->type == GI_REQ_LOAD_CHUNK)
				{
					if (gi_tombstone_has(e, wkeys[j]))
						continue;
				}
				else
					gi_tombstone_remove(e, wkeys[j]);
			}
			keys[pos] = wkeys[j];
			lists[pos] = wlists[j];
			memcpy(payloads + pos * e->record_bytes, wpay + (Size) j * e->record_bytes,
				   e->record_bytes);
			pos++;
		}
	}

	if (pos > 0)
	{
		if (gi_ops->store_set_limit)
			gi_ops->store_set_limit(e->store, gi_store_budget(e));
		st = gi_ops->store_insert(e->store, (uint32) pos, lists, keys, payloads,
								  &ninserted);
		if (st != GI_OK)
		{
			for (int i = 0; i < nvalid; i++)
				reply_backend_error(group[i], st);
			return;
		}
	}
	e->insert_batches++;
	for (int i = 0; i < nvalid; i++)
	{
		group[i]->slot->rargs.count = group[i]->slot->args.n;
		if (group[i]->slot->type == GI_REQ_INSERT)
			e->insert_requests++;
		gi_reply(group[i], GI_REPLY_OK);
	}
}

static void
delete_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	uint64		total = 0;
	uint64	   *keys;
	uint64		pos = 0;
	uint64		ndeleted = 0;
	gi_status	st;

	for (int i = 0; i < ngroup; i++)
		total += group[i]->slot->args.n;
	keys = palloc_extended(Max(total, 1) * sizeof(uint64), MCXT_ALLOC_HUGE);
	for (int i = 0; i < ngroup; i++)
	{
		GiWork	   *w = group[i];

		memcpy(keys + pos, w->buf, (Size) w->slot->args.n * sizeof(uint64));
		if (!e->ready)
			for (uint32 j = 0; j < w->slot->args.n; j++)
				gi_tombstone_add(e, keys[pos + j]);
		pos += w->slot->args.n;
	}
	st = gi_ops->store_delete(e->store, (uint32) total, keys, &ndeleted);
	for (int i = 0; i < ngroup; i++)
	{
		if (st != GI_OK)
			reply_backend_error(group[i], st);
		else
		{
			group[i]->slot->rargs.count = group[i]->slot->args.n;
			e->delete_requests++;
			gi_reply(group[i], GI_REPLY_OK);
		}
	}
	e->delete_batches++;
}

/* ---- searches, merged per (store, k, probes) ---- */

static void
search_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	uint32		k = group[0]->slot->args.k;
	uint32		probes = group[0]->slot->args.probes;
	uint64		nq = 0;
	uint64		pos = 0;
	float	   *queries;
	gi_hit	   *hits;
	uint32	   *found;
	gi_status	st;
	int			nvalid = 0;

	for (int i = 0; i < ngroup; i++)
	{
		GiSlot	   *slot = group[i]->slot;
		Size		need = gi_search_out_size(slot->args.n, k);

		if (slot->args.dim != e->dim ||
			slot->in_size != (Size) slot->args.n * e->dim * sizeof(float))
		{
			gi_reply_error(group[i], ERRCODE_DATA_EXCEPTION,
						   "gpuindex search: query has %u dimensions, index has %u",
						   slot->args.dim, e->dim);
			continue;
		}
		if (need > slot->capacity)
		{
			slot->rargs.out_needed = need;
			gi_reply(group[i], GI_REPLY_TOO_SMALL);
			continue;
		}
		group[nvalid++] = group[i];
		nq += slot->args.n;
	}
	if (nq == 0)
	{
		for (int i = 0; i < nvalid; i++)
		{
			group[i]->slot->rargs.out_size = 0;
			gi_reply(group[i], GI_REPLY_OK);
		}
		return;
	}

	queries = palloc_extended(nq * e->dim * sizeof(float), MCXT_ALLOC_HUGE);
	hits = palloc_extended(nq * k * sizeof(gi_hit), MCXT_ALLOC_HUGE);
	found = palloc_extended(nq * sizeof(uint32), MCXT_ALLOC_HUGE);
	for (int i = 0; i < nvalid; i++)
	{
		memcpy(queries + pos * e->dim, group[i]->buf, group[i]->slot->in_size);
		pos += group[i]->slot->args.n;
	}

	st = gi_ops->ivf_search(e->store, e->centroids, e->dim, (gi_metric) e->metric,
							(uint32) nq, queries, Min(probes, e->nlists), k,
							hits, found);
	e->search_batches++;
	e->searches += nq;

	pos = 0;
	for (int i = 0; i < nvalid; i++)
	{
		GiWork	   *w = group[i];
		uint32		n = w->slot->args.n;

		if (st != GI_OK)
		{
			reply_backend_error(w, st);
			continue;
		}
		memcpy(w->buf, hits + pos * k, (Size) n * k * sizeof(gi_hit));
		memcpy(gi_search_found(w->buf, n, k), found + pos, n * sizeof(uint32));
		pos += n;
		w->slot->rargs.count = n;
		w->slot->rargs.out_size = gi_search_out_size(n, k);
		gi_reply(w, GI_REPLY_OK);
	}
}

/* ---- the round ---- */

static int
cmp_work(const void *a, const void *b)
{
	const GiSlot *x = (*(GiWork *const *) a)->slot;
	const GiSlot *y = (*(GiWork *const *) b)->slot;
	int			c;

	if (x->key.dbid != y->key.dbid)
		return x->key.dbid < y->key.dbid ? -1 : 1;
	if (x->key.relid != y->key.relid)
		return x->key.relid < y->key.relid ? -1 : 1;
	c = (int) x->type - (int) y->type;
	if (c != 0)
		return c;
	if (x->args.k != y->args.k)
		return x->args.k < y->args.k ? -1 : 1;
	if (x->args.probes != y->args.probes)
		return x->args.probes < y->args.probes ? -1 : 1;
	return 0;
}

static bool
same_group(GiWork *a, GiWork *b)
{
	GiSlot	   *x = a->slot;
	GiSlot	   *y = b->slot;

	if (x->key.dbid != y->key.dbid || x->key.relid != y->key.relid)
		return false;
	/* load chunks and inserts share the insert path */
	if ((x->type == GI_REQ_LOAD_CHUNK || x->type == GI_REQ_INSERT) &&
		(y->type == GI_REQ_LOAD_CHUNK || y->type == GI_REQ_INSERT))
		return x->args.relfilenode == y->args.relfilenode;
	if (x->type != y->type || x->args.relfilenode != y->args.relfilenode)
		return false;
	if (x->type == GI_REQ_SEARCH)
		return x->args.k == y->args.k && x->args.probes == y->args.probes;
	return x->type == GI_REQ_DELETE;
}

/* requests of one group: run them against their store */
static void
run_group(GiWork **group, int n)
{
	GiReqType	type = group[0]->slot->type;
	GiStoreEntry *e;

	if (!check_ops(group[0]))
	{
		for (int i = 1; i < n; i++)
			(void) check_ops(group[i]);
		return;
	}

	e = store_for(group[0]);
	switch (type)
	{
		case GI_REQ_INSERT:
		case GI_REQ_LOAD_CHUNK:
			{
				int			nchunk = 0;

				/* chunks must belong to the load in progress */
				for (int i = 0; i < n; i++)
				{
					if (group[i]->slot->type == GI_REQ_LOAD_CHUNK &&
						load_entry(group[i]) == NULL)
						continue;
					if (e == NULL)
					{
						/* not loaded: the pages will bring it */
						group[i]->slot->rargs.count = 0;
						gi_reply(group[i], GI_REPLY_OK);
						continue;
					}
					group[nchunk++] = group[i];
				}
				if (nchunk > 0)
					insert_group(e, group, nchunk);
			}
			break;
		case GI_REQ_DELETE:
			if (e == NULL)
			{
				for (int i = 0; i < n; i++)
					gi_reply(group[i], GI_REPLY_OK);
			}
			else
				delete_group(e, group, n);
			break;
		case GI_REQ_SEARCH:
			if (e == NULL || !e->ready)
			{
				for (int i = 0; i < n; i++)
					gi_reply(group[i], GI_REPLY_NOT_LOADED);
			}
			else
				search_group(e, group, n);
			break;
		default:
			elog(ERROR, "unexpected grouped request type %d", (int) type);
	}
}

void
gi_dispatch_round(GiWork *work, int nwork)
{
	GiWork	  **order;
	int			i;

	gi_kmeans_maintain();
	if (nwork == 0)
		return;

	/* requests that stand alone first: pings, info, loads, drops */
	for (i = 0; i < nwork; i++)
	{
		GiWork	   *w = &work[i];

		switch (w->slot->type)
		{
			case GI_REQ_PING:
				gi_reply(w, GI_REPLY_OK);
				break;
			case GI_REQ_SERVICE_INFO:
				handle_service_info(w);
				break;
			case GI_REQ_STATS:
				if (check_ops(w))
					handle_stats(w);
				break;
			case GI_REQ_DROP:
				if (check_ops(w))
					handle_drop(w);
				break;
			case GI_REQ_LOAD_BEGIN:
				if (check_ops(w))
					handle_load_begin(w);
				break;
			case GI_REQ_LOAD_END:
				if (check_ops(w))
					handle_load_end(w);
				break;
			case GI_REQ_KMEANS_BEGIN:
			case GI_REQ_KMEANS_DATA:
			case GI_REQ_KMEANS_TRAIN:
			case GI_REQ_KMEANS_RESULT:
			case GI_REQ_ASSIGN:
			case GI_REQ_KMEANS_END:
				if (check_ops(w))
					gi_kmeans_handle(w);
				break;
			case GI_REQ_INSERT:
			case GI_REQ_LOAD_CHUNK:
			case GI_REQ_DELETE:
			case GI_REQ_SEARCH:
				break;			/* grouped below */
			default:
				gi_reply_error(w, ERRCODE_PROTOCOL_VIOLATION,
							   "unknown gpuindex request type %d", (int) w->slot->type);
				break;
		}
	}

	/*
	 * Sort the rest so that a store's requests sit together; type order
	 * puts inserts and deletes before searches.
	 */
	order = palloc(sizeof(GiWork *) * nwork);
	{
		int			n = 0;

		for (i = 0; i < nwork; i++)
			if (!work[i].answered)
				order[n++] = &work[i];
		qsort(order, n, sizeof(GiWork *), cmp_work);
		for (i = 0; i < n;)
		{
			int			j = i + 1;

			while (j < n && same_group(order[i], order[j]))
				j++;
			run_group(order + i, j - i);
			i = j;
		}
	}
}
