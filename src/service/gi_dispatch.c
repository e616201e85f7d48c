/*
 * gi_dispatch.c
 *		Answering one round of requests inside the device service.
 *
 * A round runs in phases.  Requests that stand alone (ping, service
 * information, statistics, drop, the loading protocol's begin and end,
 * k-means jobs) are answered first, one by one.  The others work on one
 * store and are merged per store and phase, and a store's phases run in
 * a fixed order: its records are inserted, then its keys deleted, then it
 * is searched, so that a search sees every mutation of its round.  The
 * dispatcher reads only the generic part of a request; the store's kind
 * groups its searches (gi_search.c).
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"

#include "gi_device.h"
#include "gi_dispatch.h"
#include "gi_kind.h"
#include "gi_kmeans_jobs.h"
#include "gi_service.h"
#include "gi_store_requests.h"

/* the phases of a round, in the order they run */
typedef enum GiPhase
{
	GI_PHASE_NONE = 0,			/* not a request type: refused */
	GI_PHASE_ALONE,				/* one by one, before any store phase */
	GI_PHASE_INSERT,			/* records: inserts and load chunks */
	GI_PHASE_DELETE,			/* keys */
	GI_PHASE_SEARCH				/* queries */
} GiPhase;

static const GiPhase gi_phase_of[GI_REQ_NTYPES] = {
	[GI_REQ_PING] = GI_PHASE_ALONE,
	[GI_REQ_SERVICE_INFO] = GI_PHASE_ALONE,
	[GI_REQ_STATS] = GI_PHASE_ALONE,
	[GI_REQ_LOAD_BEGIN] = GI_PHASE_ALONE,
	[GI_REQ_LOAD_CHUNK] = GI_PHASE_INSERT,
	[GI_REQ_LOAD_END] = GI_PHASE_ALONE,
	[GI_REQ_INSERT] = GI_PHASE_INSERT,
	[GI_REQ_DELETE] = GI_PHASE_DELETE,
	[GI_REQ_DROP] = GI_PHASE_ALONE,
	[GI_REQ_DEBUG_FAULT] = GI_PHASE_ALONE,
	[GI_REQ_SYNCED] = GI_PHASE_ALONE,
	[GI_REQ_SEARCH] = GI_PHASE_SEARCH,
	[GI_REQ_KMEANS_BEGIN] = GI_PHASE_ALONE,
	[GI_REQ_KMEANS_DATA] = GI_PHASE_ALONE,
	[GI_REQ_KMEANS_TRAIN] = GI_PHASE_ALONE,
	[GI_REQ_KMEANS_RESULT] = GI_PHASE_ALONE,
	[GI_REQ_ASSIGN] = GI_PHASE_ALONE,
	[GI_REQ_KMEANS_END] = GI_PHASE_ALONE,
};

static GiPhase
phase(const GiWork *w)
{
	int			type = (int) w->slot->type;

	if (type < 0 || type >= GI_REQ_NTYPES)
		return GI_PHASE_NONE;
	return gi_phase_of[type];
}

/* ---- requests that stand alone ---- */

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
	strlcpy(info->device_name, gi_ops ? gi_devices[0].name : gi_ops_unavailable,
			sizeof(info->device_name));
	info->devices = gi_ops ? gi_ndevices : 0;
	info->requests = gi_requests_total;
	info->rounds = gi_rounds_total;
	info->round_ns = gi_round_ns_total;
	info->search_ns = gi_search_ns_total;
	info->stores = gi_store_count();
	info->bytes = gi_ops ? gi_stores_bytes() : 0;
	memcpy(info->requests_by_type, gi_requests_by_type, sizeof(info->requests_by_type));
	w->slot->rargs.out_size = sizeof(GiServiceInfo);
	gi_reply(w, GI_REPLY_OK);
}

/* a store's row (shard -1: its shards summed), or one shard's */
static void
stat_row(GiStoreEntry *e, int shard, GiStoreStatRow *row)
{
	const GiServiceKind *kind = gi_kind_get(e->kind);
	const GiShard *sh = e->shards.n > 0 ? &e->shards.shard[Max(shard, 0)] : NULL;

	memset(row, 0, sizeof(*row));
	row->key = e->key;
	row->relfilenode = e->relfilenode;
	strlcpy(row->kind, kind ? kind->name : "unknown", sizeof(row->kind));
	row->ready = e->ready;
	strlcpy(row->backend, gi_ops->name, sizeof(row->backend));
	row->service_device = sh ? sh->device : 0;
	row->device = gi_devices[row->service_device].ordinal;
	row->shard = sh ? shard : -1;
	row->shards = e->shards.n;
	if (kind && e->summary)
		kind->describe(e->summary, &row->dim, row->metric, sizeof(row->metric));
	if (shard < 0)
		gi_shards_stats(&e->shards, &row->st);
	else if (sh)
		(void) gi_shard_stats(sh, &row->st);
	row->searches = e->searches;
	row->search_batches = e->search_batches;
	row->insert_requests = e->insert_requests;
	row->insert_batches = e->insert_batches;
	row->delete_requests = e->delete_requests;
	row->delete_batches = e->delete_batches;
	row->loads = e->loads;
}

/* a row per store, or with GI_STATS_SHARDS per shard */
static void
handle_stats(GiWork *w)
{
	bool		per_shard = (w->slot->args.flags & GI_STATS_SHARDS) != 0;
	GiStoreStatRow *row = (GiStoreStatRow *) w->buf;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;
	uint64		nrows = 0;

	gi_stores_seq_init(&status);
	while ((e = hash_seq_search(&status)) != NULL)
		nrows += per_shard ? Max(e->shards.n, 1) : 1;
	if (nrows * sizeof(GiStoreStatRow) > w->slot->capacity)
	{
		w->slot->rargs.out_needed = nrows * sizeof(GiStoreStatRow);
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return;
	}
	gi_stores_seq_init(&status);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (!per_shard)
			stat_row(e, -1, row++);
		else
			for (int j = 0; j < Max(e->shards.n, 1); j++)
				stat_row(e, j, row++);
	}
	w->slot->rargs.count = nrows;
	w->slot->rargs.out_size = nrows * sizeof(GiStoreStatRow);
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_drop(GiWork *w)
{
	GiStoreEntry *e;

	if (w->slot->key.relid == InvalidOid || w->slot->key.part == 0)
	{
		HASH_SEQ_STATUS status;

		/*
		 * DROP DATABASE: every store of the database; an index's store:
		 * the parts sessions hold too.  Removing the entry just returned
		 * is allowed.
		 */
		gi_stores_seq_init(&status);
		while ((e = hash_seq_search(&status)) != NULL)
			if (e->key.dbid == w->slot->key.dbid &&
				(w->slot->key.relid == InvalidOid || e->key.relid == w->slot->key.relid))
				gi_store_remove(e);
	}
	else if ((e = gi_store_lookup(&w->slot->key)) != NULL)
		gi_store_remove(e);
	gi_load_forget_oversize(&w->slot->key);
	gi_reply(w, GI_REPLY_OK);
}

/*
 * Test hook: a device error (answered, then a restart), a crash on the
 * service's thread or on a helper thread, a real CUDA fault (answered
 * with the backend's error, then a restart), or a service busy for a
 * while (requests queued meanwhile wait)
 */
static void
handle_debug_fault(GiWork *w)
{
	if (w->slot->args.n == GI_FAULT_STALL)
	{
		pg_usleep(GI_FAULT_STALL_MS * 1000L);
		gi_reply(w, GI_REPLY_OK);
		return;
	}
	if (w->slot->args.n == GI_FAULT_SIGNAL)
		raise(SIGSEGV);
	if (w->slot->args.n == GI_FAULT_THREAD)
	{
		const char *why;

		gi_device_debug_thread_fault(&why);
		gi_reply_error(w, ERRCODE_FEATURE_NOT_SUPPORTED, "%s", why);
		return;
	}
	if (w->slot->args.n == GI_FAULT_CUDA)
	{
		bool		have;
		gi_status	st = gi_device_debug_cuda_fault(&have);

		if (!have)
			gi_reply_error(w, ERRCODE_FEATURE_NOT_SUPPORTED,
						   "the injected CUDA fault needs the CUDA backend (gpuindex.device = cuda)");
		else if (st != GI_OK)
			gi_reply_status(w, st);
		else
			gi_reply_error(w, ERRCODE_INTERNAL_ERROR,
						   "the injected CUDA fault did not fault");
		return;
	}
	gi_reply_error(w, ERRCODE_SYSTEM_ERROR,
				   "gpuindex device service: injected device fault");
	gi_service_restart_pending = true;
}

/*
 * A hot standby's backend found no WAL record touching the index's pages
 * from lsn_from to lsn: a store that covers lsn_from covers lsn.
 */
static void
handle_synced(GiWork *w)
{
	GiReqArgs  *a = &w->slot->args;
	GiStoreEntry *e = gi_store_of(&w->slot->key, a->relfilenode);

	if (e && e->ready && e->synced_lsn != 0 && e->synced_lsn >= a->lsn_from &&
		e->synced_lsn < a->lsn)
		e->synced_lsn = a->lsn;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_alone(GiWork *w)
{
	switch (w->slot->type)
	{
		case GI_REQ_PING:
			gi_reply(w, GI_REPLY_OK);
			break;
		case GI_REQ_SERVICE_INFO:
			handle_service_info(w);
			break;
		case GI_REQ_STATS:
			if (gi_reply_check_backend(w))
				handle_stats(w);
			break;
		case GI_REQ_DROP:
			if (gi_reply_check_backend(w))
				handle_drop(w);
			break;
		case GI_REQ_LOAD_BEGIN:
			if (gi_reply_check_backend(w))
				gi_load_begin(w);
			break;
		case GI_REQ_LOAD_END:
			if (gi_reply_check_backend(w))
				gi_load_end(w);
			break;
		case GI_REQ_DEBUG_FAULT:
			handle_debug_fault(w);
			break;
		case GI_REQ_SYNCED:
			handle_synced(w);
			break;
		case GI_REQ_KMEANS_BEGIN:
		case GI_REQ_KMEANS_DATA:
		case GI_REQ_KMEANS_TRAIN:
		case GI_REQ_KMEANS_RESULT:
		case GI_REQ_ASSIGN:
		case GI_REQ_KMEANS_END:
			if (gi_reply_check_backend(w))
				gi_kmeans_handle(w);
			break;
		default:
			gi_reply_error(w, ERRCODE_INTERNAL_ERROR,
						   "gpuindex request type %d has no handler", (int) w->slot->type);
			break;
	}
}

/* ---- requests merged per store and phase ---- */

static int
cmp_work(const void *a, const void *b)
{
	const GiWork *wx = *(GiWork *const *) a;
	const GiWork *wy = *(GiWork *const *) b;
	const GiSlot *x = wx->slot;
	const GiSlot *y = wy->slot;

	if (x->key.dbid != y->key.dbid)
		return x->key.dbid < y->key.dbid ? -1 : 1;
	if (x->key.relid != y->key.relid)
		return x->key.relid < y->key.relid ? -1 : 1;
	if (x->key.part != y->key.part)
		return x->key.part < y->key.part ? -1 : 1;
	if (phase(wx) != phase(wy))
		return phase(wx) < phase(wy) ? -1 : 1;
	if (x->args.relfilenode != y->args.relfilenode)
		return x->args.relfilenode < y->args.relfilenode ? -1 : 1;
	return 0;
}

/* requests of one store, phase and relfilenode: run them */
static void
run_group(GiWork **group, int n)
{
	GiStoreEntry *e;
	int			nkept = 0;

	if (!gi_reply_check_backend(group[0]))
	{
		for (int i = 1; i < n; i++)
			(void) gi_reply_check_backend(group[i]);
		return;
	}

	e = gi_store_of(&group[0]->slot->key, group[0]->slot->args.relfilenode);
	switch (phase(group[0]))
	{
		case GI_PHASE_INSERT:
			for (int i = 0; i < n; i++)
			{
				/* chunks must belong to the load in progress */
				if (group[i]->slot->type == GI_REQ_LOAD_CHUNK &&
					gi_load_store(group[i]) == NULL)
					continue;
				if (e == NULL)
				{
					/* not loaded: the pages will bring it */
					group[i]->slot->rargs.count = 0;
					gi_reply(group[i], GI_REPLY_OK);
					continue;
				}
				group[nkept++] = group[i];
			}
			if (nkept > 0)
				gi_insert_group(e, group, nkept);
			break;
		case GI_PHASE_DELETE:
			if (e == NULL)
			{
				/* not loaded: nothing to delete */
				for (int i = 0; i < n; i++)
					gi_reply(group[i], GI_REPLY_OK);
			}
			else
				gi_delete_group(e, group, n);
			break;
		case GI_PHASE_SEARCH:
			if (e == NULL || !e->ready)
			{
				for (int i = 0; i < n; i++)
					gi_reply(group[i], GI_REPLY_NOT_LOADED);
				break;
			}
			for (int i = 0; i < n; i++)
			{
				/* a hot standby's store must cover what the search saw */
				if (group[i]->slot->args.lsn > e->synced_lsn)
				{
					group[i]->slot->rargs.lsn = e->synced_lsn;
					gi_reply(group[i], GI_REPLY_STALE);
					continue;
				}
				group[nkept++] = group[i];
			}
			if (nkept > 0)
				gi_search_group(e, group, nkept);
			break;
		default:
			elog(ERROR, "unexpected gpuindex request phase %d", (int) phase(group[0]));
	}
}

void
gi_dispatch_round(GiWork *work, int nwork)
{
	GiWork	  **order;
	int			n = 0;

	for (int i = 0; i < nwork; i++)
	{
		GiWork	   *w = &work[i];

		if (w->answered)
			continue;
		switch (phase(w))
		{
			case GI_PHASE_ALONE:
				handle_alone(w);
				break;
			case GI_PHASE_NONE:
				gi_reply_error(w, ERRCODE_PROTOCOL_VIOLATION,
							   "unknown gpuindex request type %d", (int) w->slot->type);
				break;
			default:
				break;			/* merged below */
		}
	}

	order = palloc(sizeof(GiWork *) * Max(nwork, 1));
	for (int i = 0; i < nwork; i++)
		if (!work[i].answered && !work[i].carry)
			order[n++] = &work[i];
	qsort(order, n, sizeof(GiWork *), cmp_work);
	for (int i = 0; i < n;)
	{
		int			j = i + 1;

		while (j < n && cmp_work(&order[i], &order[j]) == 0)
			j++;
		run_group(order + i, j - i);
		i = j;
	}
}
