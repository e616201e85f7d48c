/*
 * gpuivf_load.c
 *		Talking to the device service about one index: loading its store
 *		from the pages, requests that need the store, record streaming.
 *
 * Loading follows the protocol in gi_dispatch.c: LOAD_BEGIN (with the
 * centroids) before any list page is read, then the records of every list
 * in LOAD_CHUNKs of up to GPUIVF_CHUNK_BYTES, then LOAD_END.  Since every
 * writer changes the pages before it tells the service (inserts are queued
 * after the page append, VACUUM deletes after the page delete), and the
 * service applies inserts and deletes to a store being loaded (deletes
 * leave tombstones until LOAD_END), the loaded store equals the pages.
 * Each page is copied under a share lock and the lock dropped before
 * anything is sent, so no buffer lock is held across a service call.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"

/* sleep a little before asking again: 1, 2, 4, 8, then 10 ms */
void
gpuivf_backoff(int *attempt)
{
	long		ms = Min(1L << Min(*attempt, 4), 10L);

	(*attempt)++;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * Send n records (INSERT, or LOAD_CHUNK with its token) in the layout of
 * gi_records_*.  The caller keeps n * record size near GPUIVF_CHUNK_BYTES.
 */
void
gpuivf_send_records(GiStoreKey key, Oid relfilenode, GiReqType type,
					uint64 load_token, uint32 n, uint32 dim, const uint64 *keys,
					const uint32 *lists, const float4 *vecs, GiReply *reply)
{
	GiCall		call;
	Size		size = gi_records_size(n, dim * sizeof(float4));
	char	   *buf = palloc_extended(size, MCXT_ALLOC_HUGE);

	memcpy(gi_records_keys(buf), keys, n * sizeof(uint64));
	memcpy(gi_records_lists(buf, n), lists, n * sizeof(uint32));
	memcpy(gi_records_payloads(buf, n), vecs, (Size) n * dim * sizeof(float4));

	memset(&call, 0, sizeof(call));
	call.type = type;
	call.key = key;
	call.args.relfilenode = relfilenode;
	call.args.n = n;
	call.args.load_token = load_token;
	call.in = buf;
	call.in_size = size;
	gi_call(&call);
	pfree(buf);
	if (reply)
		*reply = call.reply;
}

/*
 * Load the index's store from its pages.  True when the store is ready
 * (loaded by us, or already loaded), false when another backend is
 * loading it or took our load over: the caller waits and retries its
 * request.
 */
bool
gpuivf_load(Relation index)
{
	GpuivfMeta *cached = gpuivf_get_meta(index);
	GpuivfMeta	meta = *cached;
	GiCall		call;
	GiReqArgs	args;
	uint64		token;
	uint32		cap;
	uint32		n = 0;
	uint64	   *keys;
	uint32	   *lnums;
	float4	   *vecs;
	char	   *pagecopy;
	BufferAccessStrategy bas;
	GiReply		reply = GI_REPLY_OK;
	GiStoreKey	key = gpuivf_store_key(index);

	if (meta.lists == 0)
		return true;			/* nothing indexed: nothing to search */

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_LOAD_BEGIN;
	call.key = key;
	call.args.relfilenode = index->rd_node.relNode;
	call.args.kind = GI_KIND_IVF_FLAT;
	call.args.nlists = meta.lists;
	call.args.dim = meta.dim;
	call.args.metric = meta.metric;
	call.args.record_bytes = meta.dim * sizeof(float4);
	call.in = cached->centroids;
	call.in_size = (Size) meta.lists * meta.dim * sizeof(float4);
	gi_call(&call);
	switch (call.reply)
	{
		case GI_REPLY_ALREADY_LOADED:
			return true;
		case GI_REPLY_BUSY:
			return false;
		case GI_REPLY_OK:
			token = call.rargs.load_token;
			break;
		default:
			elog(ERROR, "unexpected gpuindex reply %d to LOAD_BEGIN", (int) call.reply);
	}
	meta.centroids = NULL;		/* not needed any more; may be freed */
	meta.cnorms = NULL;

	cap = Max(1, GPUIVF_CHUNK_BYTES / (sizeof(uint64) + sizeof(uint32) +
									   meta.dim * sizeof(float4)));
	keys = palloc(sizeof(uint64) * cap);
	lnums = palloc(sizeof(uint32) * cap);
	vecs = palloc_extended((Size) cap * meta.dim * sizeof(float4), MCXT_ALLOC_HUGE);
	pagecopy = palloc(BLCKSZ);
	bas = GetAccessStrategy(BAS_BULKREAD);

	for (uint32 list = 0; list < meta.lists; list++)
	{
		BlockNumber listblk;
		OffsetNumber listoff;
		BlockNumber blkno;

		gpuivf_listinfo_location(&meta, list, &listblk, &listoff);
		gpuivf_read_list(index, listblk, listoff, &blkno, NULL);
		while (BlockNumberIsValid(blkno))
		{
			Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno,
												 RBM_NORMAL, bas);
			OffsetNumber maxoff;

			LockBuffer(buf, BUFFER_LOCK_SHARE);
			memcpy(pagecopy, BufferGetPage(buf), BLCKSZ);
			UnlockReleaseBuffer(buf);

			maxoff = PageGetMaxOffsetNumber(pagecopy);
			for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
			{
				GpuivfTuple tup = (GpuivfTuple) PageGetItem(pagecopy,
															PageGetItemId(pagecopy, off));

				keys[n] = gi_tid_to_key(ItemPointerGetBlockNumber(&tup->heaptid),
										ItemPointerGetOffsetNumber(&tup->heaptid));
				lnums[n] = list;
				memcpy(vecs + (Size) n * meta.dim, tup->vec, meta.dim * sizeof(float4));
				if (++n == cap)
				{
					gpuivf_send_records(key, index->rd_node.relNode, GI_REQ_LOAD_CHUNK, token, n, meta.dim,
										keys, lnums, vecs, &reply);
					n = 0;
					if (reply == GI_REPLY_BUSY)
						goto taken_over;
				}
			}
			blkno = GpuivfPageGetOpaque(pagecopy)->nextblkno;
			CHECK_FOR_INTERRUPTS();
		}
	}
	if (n > 0)
	{
		gpuivf_send_records(key, index->rd_node.relNode, GI_REQ_LOAD_CHUNK, token, n, meta.dim,
							keys, lnums, vecs, &reply);
		if (reply == GI_REPLY_BUSY)
			goto taken_over;
	}

	memset(&args, 0, sizeof(args));
	args.relfilenode = index->rd_node.relNode;
	args.load_token = token;
	reply = gi_call_simple(GI_REQ_LOAD_END, &key, &args, NULL);

taken_over:
	pfree(keys);
	pfree(lnums);
	pfree(vecs);
	pfree(pagecopy);
	FreeAccessStrategy(bas);
	return reply != GI_REPLY_BUSY;
}

/*
 * End of a build: the new pages replace whatever the service held for this
 * index (REINDEX and TRUNCATE give new pages; a stale store of a reused OID
 * must not survive either), and an index with nothing indexed has no store.
 */
void
gpuivf_load_or_drop(Relation index)
{
	GiStoreKey	key = gpuivf_store_key(index);
	int			attempt = 0;

	(void) gi_call_simple(GI_REQ_DROP, &key, NULL, NULL);
	if (gpuivf_get_meta(index)->lists == 0)
		return;
	while (!gpuivf_load(index))
		gpuivf_backoff(&attempt);
}

/*
 * A request that needs the store (a search): load it when the service
 * does not have it, wait while someone else loads it.
 */
void
gpuivf_call(Relation index, GiCall *call)
{
	int			attempt = 0;

	for (;;)
	{
		gi_call(call);
		switch (call->reply)
		{
			case GI_REPLY_OK:
				return;
			case GI_REPLY_NOT_LOADED:
				if (gpuivf_load(index))
				{
					CHECK_FOR_INTERRUPTS();
					continue;
				}
				gpuivf_backoff(&attempt);
				break;
			case GI_REPLY_BUSY:
				gpuivf_backoff(&attempt);
				break;
			default:
				elog(ERROR, "unexpected gpuindex reply %d", (int) call->reply);
		}
	}
}

/*
 * k nearest rows for each of nq queries (nq * dim floats): returns
 * hits[nq * k] in ascending (distance, key) order per query, *found[q]
 * real hits each.  Both point into one palloc'd answer.
 */
gi_hit *
gpuivf_search_service(Relation index, uint32 dim, const float4 *queries, uint32 nq, uint32 k, uint32 probes,
					  uint32 **found)
{
	GiCall		call;

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_SEARCH;
	call.key = gpuivf_store_key(index);
	call.args.relfilenode = index->rd_node.relNode;
	call.args.dim = dim;
	call.args.n = nq;
	call.args.k = k;
	call.args.probes = probes;
	call.in = queries;
	call.in_size = (Size) nq * dim * sizeof(float4);
	call.out_capacity = gi_search_out_size(nq, k);
	gpuivf_call(index, &call);

	if (call.rargs.out_size != gi_search_out_size(nq, k) || call.out == NULL)
		elog(ERROR, "gpuindex search answered %llu bytes, expected %llu",
			 (unsigned long long) call.rargs.out_size,
			 (unsigned long long) gi_search_out_size(nq, k));
	*found = gi_search_found(call.out, nq, k);
	return (gi_hit *) call.out;
}
