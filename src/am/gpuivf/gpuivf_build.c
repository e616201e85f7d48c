/*
 * gpuivf_build.c
 *		CREATE INDEX / REINDEX / TRUNCATE: sample, train, assign, write the
 *		pages, load the device store.
 *
 * Pass 1 scans the table, fixes the dimension from the first row, checks
 * every row and keeps a seeded reservoir sample (Algorithm R) of
 * max(GPUIVF_SAMPLES_PER_LIST * lists, GPUIVF_MIN_SAMPLES) vectors, fewer
 * if maintenance_work_mem cannot hold them (but never fewer than lists).
 * k-means trains min(lists, sampled rows) centroids.  With quantizer =
 * 'pq' the codebooks are then trained on the sample's residuals
 * (gpuivf_pq.c).  Pass 2 scans the table again, assigns every row to its
 * nearest centroid (in batches of about GI_CHUNK_BYTES) and feeds (list,
 * TID, record) to a tuplesort, the record being the vector or its PQ
 * code, so that each list's chain is written in one go, TIDs ascending.
 *
 * Where the k-means runs: the build asks the device service once
 * (GI_REQ_KMEANS_BEGIN).  When its compute backend trains (CUDA), the
 * sample goes to the service for training (and with it a pq index's
 * codebooks, gpuivf_pq.c) and every batch of pass 2 for assignment
 * (GI_REQ_ASSIGN), all on the GPU.  Otherwise (the host
 * backend) both run here, in the building backend, so that builds run in
 * parallel instead of queueing in the service.  A device failure in the
 * middle (out of device memory, a CUDA error, a service restart) makes
 * the build finish the rest here, with a WARNING; the index is valid
 * either way.  Both are deterministic for a given device: the same rows
 * in the same order give the same index.  Pages are written through shared buffers
 * without WAL and logged as full-page images at the end
 * (log_newpage_range), the way other index builds do.  Finally the index
 * is loaded into the device service, so that it is resident at once.
 *
 * A table with no indexable rows gives an index with no lists: the first
 * insert fixes the dimension and creates a single list (see
 * gpuivf_initialize_lists).
 */
#include "postgres.h"

#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "commands/progress.h"
#include "common/pg_prng.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "access/xloginsert.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"

#include "gpuivf.h"
#include "host_store.h"

typedef struct GpuivfBuildState
{
	Relation	heap;
	Relation	index;
	uint32		metric;
	int			lists_opt;
	int			dim;			/* 0 until the first row */
	GpuivfQuantizer qz;			/* flat, or pq with its sizes */
	uint32		record_bytes;	/* a row's record: vector or code */
	float4	   *codebooks;		/* pq: qz.pq_ksub * dim */
	GpuivfMeta	pqmeta;			/* pq: what the encoder needs */

	/* pass 1: reservoir sample */
	int			sample_target;
	int			sample_cap;
	int			nsamples;
	float4	   *samples;
	double		nindexable;		/* rows seen that will be indexed */
	pg_prng_state prng;

	/* k-means on the device service's backend: its job, 0 when none */
	uint64		job;

	/* pass 2 */
	uint32		lists;
	float4	   *centroids;
	float4	   *cnorms;
	uint32		batch_cap;		/* rows per assignment batch */
	uint32		batch_n;
	float4	   *batch_vecs;		/* batch_cap * dim */
	uint64	   *batch_keys;
	uint32	   *batch_lists;
	uint8	   *batch_codes;	/* pq: batch_cap * record_bytes */
	bytea	   *payload;		/* one row's vector for the sort */
	Tuplesortstate *sort;
	TupleDesc	sortdesc;
	TupleTableSlot *slot;		/* into the sort (virtual) */
	TupleTableSlot *outslot;	/* out of the sort (minimal tuples) */
	double		indtuples;

	/* phase timings (DEBUG1) and where the k-means ran */
	instr_time	phase_start;
	double		phase_ms[5];	/* sample, train, assign, write, load */
	bool		trained_on_device;
	bool		assigned_on_device;

	MemoryContext buildcxt;		/* lives as long as the build */
	MemoryContext tmpcxt;		/* reset after every row */
} GpuivfBuildState;

/* validated floats of a build row; NULL when the row is not indexed */
static const float4 *
build_row_floats(GpuivfBuildState *bs, Datum value, int *dim)
{
	const float4 *vec = gpuivf_datum_floats(bs->index, value, dim, "vector");

	if (*dim > GPUIVF_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gpuivf indexes support at most %d dimensions", GPUIVF_MAX_DIM),
				 errdetail("A row has %d dimensions.", *dim)));
	if (bs->dim == 0)
		bs->dim = *dim;
	else if (bs->dim != *dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("expected %d dimensions, not %d", bs->dim, *dim),
				 errdetail("All vectors in a gpuivf index have the dimensions of the first one.")));
	if (!gpuivf_vector_indexable(bs->metric, vec, *dim))
		return NULL;
	return vec;
}

static void
sample_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
				bool tupleIsAlive, void *state)
{
	GpuivfBuildState *bs = (GpuivfBuildState *) state;
	MemoryContext old;
	const float4 *vec;
	int			dim;

	if (isnull[0])
		return;

	old = MemoryContextSwitchTo(bs->tmpcxt);
	vec = build_row_floats(bs, values[0], &dim);
	if (vec != NULL)
	{
		int			slot = -1;

		if (bs->samples == NULL)
		{
			/* the dimension is known now: size the reservoir */
			Size		budget = (Size) maintenance_work_mem * 1024;
			Size		per = (Size) dim * sizeof(float4);

			bs->sample_cap = bs->sample_target;
			if ((Size) bs->sample_cap * per > budget)
				bs->sample_cap = (int) Max(budget / per, (Size) bs->lists_opt);
			bs->samples = MemoryContextAllocHuge(bs->buildcxt,
												 (Size) bs->sample_cap * per);
		}

		if (bs->nsamples < bs->sample_cap)
			slot = bs->nsamples++;
		else
		{
			uint64		j = pg_prng_uint64_range(&bs->prng, 0, (uint64) bs->nindexable);

			if (j < (uint64) bs->sample_cap)
				slot = (int) j;
		}
		if (slot >= 0)
			memcpy(bs->samples + (Size) slot * dim, vec, dim * sizeof(float4));
		bs->nindexable += 1;
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(bs->tmpcxt);
}

/* ---- k-means on the device service's backend ---- */

/* the build no longer needs its k-means job in the service */
static void
end_job(GpuivfBuildState *bs)
{
	gpuivf_service_kmeans_end(&bs->job);
}

/*
 * Train on the service's backend when it can: true with bs->lists and
 * bs->centroids set and bs->job open for the assignment; false when the
 * build must train itself.
 */
static bool
device_kmeans(GpuivfBuildState *bs)
{
	uint32		k;

	if (!gpuivf_service_kmeans(bs->index, "k-means training", bs->samples,
							   (uint32) bs->nsamples, (uint32) bs->dim,
							   (uint32) bs->lists_opt, bs->metric, false,
							   bs->centroids, &k, &bs->job))
		return false;
	bs->lists = k;
	return true;
}

/* the nearest lists of the batch on the service's backend; false: do it here */
static bool
device_assign(GpuivfBuildState *bs)
{
	GiCall		call;

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_ASSIGN;
	GI_KARGS(&call.args, GiKmeansArgs)->job = bs->job;
	GI_KARGS(&call.args, GiKmeansArgs)->dim = bs->dim;
	call.args.n = bs->batch_n;
	call.in = bs->batch_vecs;
	call.in_size = (Size) bs->batch_n * bs->dim * sizeof(float4);
	call.out_capacity = (Size) bs->batch_n * sizeof(uint32);
	gi_call(&call);
	if (call.reply != GI_REPLY_OK)
	{
		gpuivf_service_kmeans_failed(bs->index, &bs->job, &call, "k-means assignment");
		return false;
	}
	if (call.rargs.out_size != (Size) bs->batch_n * sizeof(uint32) || call.out == NULL)
		elog(ERROR, "gpuindex assignment answered %llu bytes for %u rows",
			 (unsigned long long) call.rargs.out_size, bs->batch_n);
	memcpy(bs->batch_lists, call.out, (Size) bs->batch_n * sizeof(uint32));
	pfree(call.out);
	for (uint32 i = 0; i < bs->batch_n; i++)
		if (bs->batch_lists[i] >= bs->lists)
			elog(ERROR, "gpuindex assignment named list %u of %u",
				 bs->batch_lists[i], bs->lists);
	return true;
}

/* give the rows of the batch their lists and feed them to the sort */
static void
flush_batch(GpuivfBuildState *bs)
{
	if (bs->batch_n == 0)
		return;
	if (bs->job == 0 || !device_assign(bs))
	{
		CHECK_FOR_INTERRUPTS();
		gi_host_nearest_lists(bs->centroids, bs->cnorms, bs->lists, bs->dim,
							  (gi_metric) bs->metric, bs->batch_n, bs->batch_vecs,
							  bs->batch_lists);
	}
	if (bs->qz.quantizer == GPUIVF_QUANTIZER_PQ)
	{
		gpuivf_pq_encode_batch(&bs->pqmeta, bs->batch_n, bs->batch_lists, bs->batch_vecs,
							   bs->batch_codes);
	}
	for (uint32 i = 0; i < bs->batch_n; i++)
	{
		const float4 *vec = bs->batch_vecs + (Size) i * bs->dim;

		if (bs->qz.quantizer == GPUIVF_QUANTIZER_PQ)
			memcpy(VARDATA(bs->payload), bs->batch_codes + (Size) i * bs->record_bytes,
				   bs->record_bytes);
		else
			memcpy(VARDATA(bs->payload), vec, bs->dim * sizeof(float4));
		ExecClearTuple(bs->slot);
		bs->slot->tts_values[0] = Int32GetDatum((int32) bs->batch_lists[i]);
		bs->slot->tts_values[1] = Int64GetDatum((int64) bs->batch_keys[i]);
		bs->slot->tts_values[2] = PointerGetDatum(bs->payload);
		bs->slot->tts_isnull[0] = bs->slot->tts_isnull[1] = bs->slot->tts_isnull[2] = false;
		ExecStoreVirtualTuple(bs->slot);
		tuplesort_puttupleslot(bs->sort, bs->slot);
	}
	bs->indtuples += bs->batch_n;
	bs->batch_n = 0;
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) bs->indtuples);
}

static void
assign_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
				bool tupleIsAlive, void *state)
{
	GpuivfBuildState *bs = (GpuivfBuildState *) state;
	MemoryContext old;
	const float4 *vec;
	int			dim;

	if (isnull[0])
		return;

	old = MemoryContextSwitchTo(bs->tmpcxt);
	vec = build_row_floats(bs, values[0], &dim);
	if (vec != NULL)
	{
		memcpy(bs->batch_vecs + (Size) bs->batch_n * dim, vec, dim * sizeof(float4));
		bs->batch_keys[bs->batch_n] = gi_tid_to_key(ItemPointerGetBlockNumber(tid),
													ItemPointerGetOffsetNumber(tid));
		bs->batch_n++;
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(bs->tmpcxt);
	if (bs->batch_n == bs->batch_cap)
		flush_batch(bs);
}

/* the codebook pages of a pq index, from the next block on: the first */
static BlockNumber
write_codebooks(GpuivfBuildState *bs, ForkNumber forknum)
{
	Size		total = (Size) bs->qz.pq_ksub * bs->dim;
	BlockNumber first = InvalidBlockNumber;

	for (Size done = 0; done < total;)
	{
		Size		n = Min(total - done, (Size) GPUIVF_CODEBOOK_PAGE_FLOATS);
		Buffer		buf = gi_new_buffer(bs->index, forknum, true);
		Page		page = BufferGetPage(buf);

		if (done == 0)
			first = BufferGetBlockNumber(buf);
		gi_init_page(page, GPUIVF_PAGE_CODEBOOK, GPUIVF_PAGE_ID);
		if (PageAddItem(page, (Item) (bs->codebooks + done), n * sizeof(float4),
						InvalidOffsetNumber, false, false) != FirstOffsetNumber)
			elog(ERROR, "failed to add codebook item to gpuivf index \"%s\"",
				 RelationGetRelationName(bs->index));
		MarkBufferDirty(buf);
		UnlockReleaseBuffer(buf);
		done += n;
	}
	return first;
}

/* metapage, list-info pages (centroids, empty chains), codebook pages */
static void
write_meta_and_lists(GpuivfBuildState *bs, ForkNumber forknum)
{
	Relation	index = bs->index;
	Buffer		metabuf;
	uint32		per = bs->dim > 0 ? gpuivf_lists_per_page(bs->dim) : 0;
	Size		itemsz = GPUIVF_ITEM_SIZE(bs->dim);
	GpuivfListInfo info;
	Buffer		buf = InvalidBuffer;
	BlockNumber first = InvalidBlockNumber;
	BlockNumber codebook_start = InvalidBlockNumber;

	metabuf = gi_new_buffer(index, forknum, true);
	Assert(BufferGetBlockNumber(metabuf) == GPUIVF_METAPAGE_BLKNO);

	if (bs->lists > 0)
	{
		info = palloc0(itemsz);
		info->head.start = InvalidBlockNumber;
		info->head.insert = InvalidBlockNumber;
		for (uint32 l = 0; l < bs->lists; l++)
		{
			Page		page;

			if (l % per == 0)
			{
				if (BufferIsValid(buf))
				{
					MarkBufferDirty(buf);
					UnlockReleaseBuffer(buf);
				}
				buf = gi_new_buffer(index, forknum, true);
				if (l == 0)
					first = BufferGetBlockNumber(buf);
				gi_init_page(BufferGetPage(buf), GPUIVF_PAGE_LISTINFO, GPUIVF_PAGE_ID);
			}
			page = BufferGetPage(buf);
			memcpy(info->centroid, bs->centroids + (Size) l * bs->dim,
				   bs->dim * sizeof(float4));
			if (PageAddItem(page, (Item) info, itemsz, InvalidOffsetNumber, false, false) !=
				FirstOffsetNumber + l % per)
				elog(ERROR, "failed to add list-info item to gpuivf index \"%s\"",
					 RelationGetRelationName(index));
		}
		MarkBufferDirty(buf);
		UnlockReleaseBuffer(buf);
		pfree(info);
		if (bs->qz.quantizer == GPUIVF_QUANTIZER_PQ)
			codebook_start = write_codebooks(bs, forknum);
	}

	gpuivf_init_metapage(BufferGetPage(metabuf), bs->dim, bs->lists, bs->lists_opt,
						 bs->metric, first, &bs->qz, codebook_start);
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);
}

/* pass 2's sorted output: one chain per list, then the list-info items */
static void
write_lists(GpuivfBuildState *bs)
{
	GpuivfMeta	meta;
	GiListDir	dir;
	GiChainBuild cb;
	Size		itemsz = GPUIVF_RECORD_ITEM_SIZE(bs->record_bytes);
	GpuivfTuple tup = palloc0(itemsz);
	double		done = 0;

	gi_chain_build_begin(&cb, bs->index, GPUIVF_PAGE_ID, bs->lists);
	while (tuplesort_gettupleslot(bs->sort, true, false, bs->outslot, NULL))
	{
		bool		isnull;
		int32		list = DatumGetInt32(slot_getattr(bs->outslot, 1, &isnull));
		uint64		key = (uint64) DatumGetInt64(slot_getattr(bs->outslot, 2, &isnull));
		bytea	   *payload = DatumGetByteaPP(slot_getattr(bs->outslot, 3, &isnull));

		gi_key_to_tid(key, &tup->heaptid);
		memcpy(tup->vec, VARDATA_ANY(payload), bs->record_bytes);
		gi_chain_build_add(&cb, (uint32) list, tup, itemsz);

		done += 1;
		if (((int64) done & 1023) == 0)
		{
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) done);
			CHECK_FOR_INTERRUPTS();
		}
	}
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) done);

	/* the chains' ends go into the list-info items */
	memset(&meta, 0, sizeof(meta));
	meta.lists = bs->lists;
	meta.lists_per_page = gpuivf_lists_per_page(bs->dim);
	meta.listinfo_start = GPUIVF_METAPAGE_BLKNO + 1;
	gpuivf_list_dir(&meta, &dir);
	gi_chain_build_end(&cb, &dir);
	pfree(tup);
}

static void
begin_sort(GpuivfBuildState *bs)
{
	AttrNumber	attNums[2] = {1, 2};
	Oid			sortOperators[2] = {Int4LessOperator, Int8LessOperator};
	Oid			sortCollations[2] = {InvalidOid, InvalidOid};
	bool		nullsFirst[2] = {false, false};

	bs->sortdesc = CreateTemplateTupleDesc(3);
	TupleDescInitEntry(bs->sortdesc, (AttrNumber) 1, "list", INT4OID, -1, 0);
	TupleDescInitEntry(bs->sortdesc, (AttrNumber) 2, "key", INT8OID, -1, 0);
	TupleDescInitEntry(bs->sortdesc, (AttrNumber) 3, "vec", BYTEAOID, -1, 0);
	bs->slot = MakeSingleTupleTableSlot(bs->sortdesc, &TTSOpsVirtual);
	bs->outslot = MakeSingleTupleTableSlot(bs->sortdesc, &TTSOpsMinimalTuple);
	bs->sort = tuplesort_begin_heap(bs->sortdesc, 2, attNums, sortOperators,
									sortCollations, nullsFirst,
									maintenance_work_mem, NULL, TUPLESORT_NONE);
}

/* end of a phase: its milliseconds into bs->phase_ms[i] */
static void
phase_done(GpuivfBuildState *bs, int i)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, bs->phase_start);
	bs->phase_ms[i] = INSTR_TIME_GET_MILLISEC(now);
	INSTR_TIME_SET_CURRENT(bs->phase_start);
}

IndexBuildResult *
gpuivf_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result;
	GpuivfBuildState bs;
	double		reltuples;

	/* without the device service the index could never be searched */
	gi_require_service();

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data",
			 RelationGetRelationName(index));

	memset(&bs, 0, sizeof(bs));
	bs.heap = heap;
	bs.index = index;
	bs.metric = gpuivf_opclass_metric(index);
	bs.lists_opt = gpuivf_lists_option(index);
	bs.sample_target = Max(GPUIVF_SAMPLES_PER_LIST * bs.lists_opt, GPUIVF_MIN_SAMPLES);
	pg_prng_seed(&bs.prng, GPUIVF_SEED);
	bs.buildcxt = CurrentMemoryContext;
	bs.tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "gpuivf build row",
									  ALLOCSET_DEFAULT_SIZES);
	/* options that can be refused before the table is read */
	(void) gpuivf_quantizer_option(index, 0);

	/* pass 1 */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUIVF_PHASE_SAMPLE);
	INSTR_TIME_SET_CURRENT(bs.phase_start);
	reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
									   sample_callback, &bs, NULL);
	phase_done(&bs, 0);
	bs.qz = gpuivf_quantizer_option(index, (uint32) bs.dim);

	/* train */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUIVF_PHASE_KMEANS);
	if (bs.nsamples > 0)
	{
		float4	   *raw = NULL;

		/* the codebooks train on the vectors as they are; k-means may scale them */
		if (bs.qz.quantizer == GPUIVF_QUANTIZER_PQ)
		{
			raw = palloc_extended((Size) bs.nsamples * bs.dim * sizeof(float4),
								  MCXT_ALLOC_HUGE);
			memcpy(raw, bs.samples, (Size) bs.nsamples * bs.dim * sizeof(float4));
		}
		bs.centroids = palloc_extended((Size) bs.lists_opt * bs.dim * sizeof(float4),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		bs.trained_on_device = device_kmeans(&bs);
		if (!bs.trained_on_device)
			bs.lists = gpuivf_kmeans(bs.samples, bs.nsamples, bs.dim, bs.lists_opt,
									 bs.metric, bs.centroids);
		pfree(bs.samples);
		bs.samples = NULL;
		if (bs.lists == 0)
			end_job(&bs);		/* nothing to assign */
		if (bs.lists > 0)
		{
			bs.cnorms = palloc(sizeof(float4) * bs.lists);
			gpuivf_centroid_norms(bs.centroids, bs.lists, bs.dim, bs.cnorms);
		}
		if (raw && bs.lists > 0)
		{
			bs.codebooks = palloc_extended((Size) bs.qz.pq_ksub * bs.dim * sizeof(float4),
										   MCXT_ALLOC_HUGE);
			gpuivf_pq_train(bs.index, bs.trained_on_device, raw, (uint32) bs.nsamples,
							(uint32) bs.dim, bs.metric, bs.centroids, bs.cnorms, bs.lists,
							&bs.qz, bs.codebooks);
			bs.pqmeta.dim = (uint32) bs.dim;
			bs.pqmeta.lists = bs.lists;
			bs.pqmeta.metric = bs.metric;
			bs.pqmeta.quantizer = GPUIVF_QUANTIZER_PQ;
			bs.pqmeta.pq_m = bs.qz.pq_m;
			bs.pqmeta.pq_ksub = bs.qz.pq_ksub;
			bs.pqmeta.pq_code_bits = bs.qz.pq_code_bits;
			bs.pqmeta.centroids = bs.centroids;
			bs.pqmeta.cnorms = bs.cnorms;
			bs.pqmeta.codebooks = bs.codebooks;
		}
		if (raw)
			pfree(raw);
	}
	bs.record_bytes = bs.qz.quantizer == GPUIVF_QUANTIZER_PQ ?
		gi_ivfpq_record_bytes(bs.qz.pq_m, bs.qz.pq_code_bits) :
		(uint32) bs.dim * sizeof(float4);
	if (bs.lists > 0 && bs.lists < (uint32) bs.lists_opt)
		ereport(NOTICE,
				(errmsg("gpuivf index \"%s\" created with %u lists instead of %d",
						RelationGetRelationName(index), bs.lists, bs.lists_opt),
				 errdetail("The table has only %.0f indexable rows.", bs.nindexable),
				 errhint("REINDEX once the table holds more rows than lists.")));

	phase_done(&bs, 1);

	write_meta_and_lists(&bs, MAIN_FORKNUM);

	if (bs.lists > 0)
	{
		/* pass 2 */
		bs.batch_cap = gpuivf_vectors_per_request((uint32) bs.dim);
		bs.batch_vecs = palloc_extended((Size) bs.batch_cap * bs.dim * sizeof(float4),
										MCXT_ALLOC_HUGE);
		bs.batch_keys = palloc(sizeof(uint64) * bs.batch_cap);
		bs.batch_lists = palloc(sizeof(uint32) * bs.batch_cap);
		if (bs.qz.quantizer == GPUIVF_QUANTIZER_PQ)
			bs.batch_codes = palloc_extended((Size) bs.batch_cap * bs.record_bytes,
											 MCXT_ALLOC_HUGE);
		bs.payload = palloc0(VARHDRSZ + bs.record_bytes);
		SET_VARSIZE(bs.payload, VARHDRSZ + bs.record_bytes);
		begin_sort(&bs);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUIVF_PHASE_ASSIGN);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, (int64) bs.nindexable);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
		reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
										   assign_callback, &bs, NULL);
		flush_batch(&bs);
		bs.assigned_on_device = bs.job != 0;
		end_job(&bs);
		phase_done(&bs, 2);

		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUIVF_PHASE_WRITE);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, (int64) bs.indtuples);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
		tuplesort_performsort(bs.sort);
		write_lists(&bs);
		tuplesort_end(bs.sort);
		ExecDropSingleTupleTableSlot(bs.slot);
		ExecDropSingleTupleTableSlot(bs.outslot);
	}
	if (RelationNeedsWAL(index))
		log_newpage_range(index, MAIN_FORKNUM, 0, RelationGetNumberOfBlocks(index), true);
	phase_done(&bs, 3);

	/* resident at once; replaces the store of the old pages (REINDEX) */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUIVF_PHASE_LOAD);
	gi_remember_built(index);
	gi_store_replace(index, gpuivf_load);

	phase_done(&bs, 4);
	ereport(DEBUG1,
			(errmsg("gpuivf build of \"%s\": %.0f rows, %d samples, %u lists; "
					"sample %.1f ms, k-means %.1f ms (%s), assign %.1f ms (%s), "
					"sort and write %.1f ms, load %.1f ms",
					RelationGetRelationName(index), bs.indtuples, bs.nsamples, bs.lists,
					bs.phase_ms[0], bs.phase_ms[1],
					bs.trained_on_device ? "device service" : "this backend",
					bs.phase_ms[2],
					bs.assigned_on_device ? "device service" : "this backend",
					bs.phase_ms[3], bs.phase_ms[4])));

	MemoryContextDelete(bs.tmpcxt);

	result = palloc(sizeof(IndexBuildResult));
	result->heap_tuples = reltuples;
	result->index_tuples = bs.indtuples;
	return result;
}

/*
 * The init fork of an unlogged index: a metapage with no lists.  There is
 * nothing to load.
 */
void
gpuivf_buildempty(Relation index)
{
	Buffer		metabuf;
	uint32		metric = gpuivf_opclass_metric(index);

	metabuf = gi_new_buffer(index, INIT_FORKNUM, true);
	Assert(BufferGetBlockNumber(metabuf) == GPUIVF_METAPAGE_BLKNO);
	START_CRIT_SECTION();
	gpuivf_init_metapage(BufferGetPage(metabuf), 0, 0, gpuivf_lists_option(index),
						 metric, InvalidBlockNumber, NULL, InvalidBlockNumber);
	MarkBufferDirty(metabuf);
	log_newpage_buffer(metabuf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(metabuf);
}
