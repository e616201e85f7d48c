/*
 * gpuivf_rerank.c
 *		Exact distances for the candidates of a pq index: each candidate's
 *		vector is read from the table (the row version the snapshot sees)
 *		and compared with the query by the index's metric.
 *
 * Used by ordered scans with gpuivf.pq_rerank > 0.  The indexed value is
 * formed as CREATE INDEX formed it (FormIndexDatum: a column or an
 * expression), then turned into floats by the operator class.
 */
#include "postgres.h"

#include <math.h>

#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "utils/float.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"

struct GpuivfRerank
{
	Relation	index;
	IndexInfo  *indexInfo;
	EState	   *estate;
	TupleTableSlot *slot;
	IndexFetchTableData *fetch;
	MemoryContext tmpcxt;
};

GpuivfRerank *
gpuivf_rerank_begin(Relation index, Relation heap)
{
	GpuivfRerank *rr = palloc0(sizeof(GpuivfRerank));

	rr->index = index;
	rr->indexInfo = BuildIndexInfo(index);
	rr->estate = CreateExecutorState();
	rr->slot = table_slot_create(heap, NULL);
	GetPerTupleExprContext(rr->estate)->ecxt_scantuple = rr->slot;
	rr->fetch = table_index_fetch_begin(heap);
	rr->tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "gpuivf rerank",
									   ALLOCSET_DEFAULT_SIZES);
	return rr;
}

void
gpuivf_rerank_end(GpuivfRerank *rr)
{
	table_index_fetch_end(rr->fetch);
	ExecDropSingleTupleTableSlot(rr->slot);
	FreeExecutorState(rr->estate);
	MemoryContextDelete(rr->tmpcxt);
	pfree(rr);
}

/*
 * Replace the distances of hits[0..n-1] by exact ones (ranked as the
 * service ranks flat records, rounded to float, NaN as +Inf) and sort them
 * by (distance, key).  Rows the snapshot does not see, or whose value is
 * NULL now, are dropped.  Returns how many are left.
 */
uint32
gpuivf_rerank(GpuivfRerank *rr, Snapshot snapshot, const float4 *query, uint32 dim,
			  uint32 metric, gi_hit *hits, uint32 n)
{
	uint32		kept = 0;

	for (uint32 i = 0; i < n; i++)
	{
		ItemPointerData tid;
		bool		call_again = false;
		bool		all_dead = false;
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];
		MemoryContext old;
		bool		found;

		CHECK_FOR_INTERRUPTS();
		gi_key_to_tid(hits[i].key, &tid);
		found = table_index_fetch_tuple(rr->fetch, &tid, snapshot, rr->slot,
										&call_again, &all_dead);
		if (!found)
			continue;
		old = MemoryContextSwitchTo(rr->tmpcxt);
		ResetExprContext(GetPerTupleExprContext(rr->estate));
		FormIndexDatum(rr->indexInfo, rr->slot, rr->estate, values, isnull);
		if (!isnull[0])
		{
			int			vdim;
			const float4 *vec = gpuivf_datum_floats(rr->index, values[0], &vdim, "vector");
			float		d;

			if ((uint32) vdim == dim)
			{
				d = (float) gpuivf_exact_distance(metric, query, vec, dim);
				hits[kept].key = hits[i].key;
				hits[kept].distance = isnan(d) ? get_float4_infinity() : d;
				hits[kept].pad = 0;
				kept++;
			}
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(rr->tmpcxt);
		ExecClearTuple(rr->slot);
	}
	if (kept > 1)
		qsort(hits, kept, sizeof(gi_hit), gi_hit_cmp);
	return kept;
}
