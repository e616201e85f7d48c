/*
 * genie_handler.c
 *		The genie access method: handler, options, operator-class
 *		validation, and the value map that puts keywords into gpusparse's
 *		pages and store.
 *
 * A keyword goes to list keyword mod lists.  A row becomes a sparse vector
 * over the lists with weight 1 on each list it has a keyword in; a query,
 * one with weight = the number of its items (keywords or keyword ranges)
 * with a keyword in that list.  Their inner product counts, for each query
 * item, whether the row has some keyword in a list the item touches: at
 * least the number of items the row matches, so the
 * index's distance (minus that product) never exceeds the operator's, and
 * the scan asks the executor to recheck and reorder.
 */
#include "postgres.h"

#include <float.h>

#include "access/amvalidate.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_class.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "genie.h"
#include "gpusparse.h"

PG_FUNCTION_INFO_V1(genie_handler);

static relopt_kind genie_relopt_kind;

/* called from _PG_init, in every process that loads the library */
void
genie_init(void)
{
	genie_relopt_kind = add_reloption_kind();
	add_int_reloption(genie_relopt_kind, "lists",
					  "Posting lists of the index (keyword mod lists)",
					  GENIE_DEFAULT_LISTS, 1, GI_SPARSE_MAX_LISTS, AccessExclusiveLock);
	gpusparse_add_vacuum_log_limit(genie_relopt_kind);
}

static bytea *
genie_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"lists", RELOPT_TYPE_INT, offsetof(GenieOptions, lists)},
		{"vacuum_log_limit", RELOPT_TYPE_INT, offsetof(GenieOptions, vacuum_log_limit)},
	};

	return (bytea *) build_reloptions(reloptions, validate, genie_relopt_kind,
									  sizeof(GenieOptions), tab, lengthof(tab));
}

/* the index's lists: fixed in the metapage by its first row, else the option */
static uint32
index_lists(Relation index, uint32 dim)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	if (dim != 0)
		return dim;
	return opts ? (uint32) opts->lists : GENIE_DEFAULT_LISTS;
}

static int
list_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/* a row's sparse vector over lists: 1 on every list it has a keyword in */
static SpVec *
keys_to_lists(const uint64 *keys, uint32 nkeys, uint32 lists)
{
	int32	   *l = palloc(sizeof(int32) * Max(nkeys, 1));
	SpVec	   *v;
	int			nnz = 0;

	if (nkeys > (uint32) SPVEC_MAX_NNZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie value may have at most %d keywords, not %u",
						SPVEC_MAX_NNZ, nkeys)));
	for (uint32 i = 0; i < nkeys; i++)
		l[i] = (int32) (keys[i] % lists);
	qsort(l, nkeys, sizeof(int32), list_cmp);
	for (uint32 i = 0; i < nkeys; i++)
		if (nnz == 0 || l[nnz - 1] != l[i])
			l[nnz++] = l[i];
	v = spvec_alloc((int) lists, nnz);
	memcpy(v->indices, l, sizeof(int32) * nnz);
	for (int i = 0; i < nnz; i++)
		SPVEC_VALUES(v)[i] = 1.0f;
	pfree(l);
	return v;
}

/* a run of lists [from, to] that a query item touches, and +1 or -1 at its ends */
typedef struct ListEdge
{
	int64		at;
	int32		delta;
} ListEdge;

static int
edge_cmp(const void *a, const void *b)
{
	int64		x = ((const ListEdge *) a)->at;
	int64		y = ((const ListEdge *) b)->at;

	return (x > y) - (x < y);
}

/*
 * A query's sparse vector over lists: the weight of a list is the number
 * of items with a keyword in it.  An item's keywords lo..hi fall in a run
 * of consecutive lists (mod lists), so a sweep over the runs' ends gives
 * the weights in O(items log items + lists touched).
 */
SpVec *
genie_query_spvec(const GenieItem *items, uint32 nitems, uint32 lists)
{
	ListEdge   *edge;
	int			nedges = 0;
	int32		all = 0;
	int32		cur;
	int64		from;
	int64		nnz = 0;
	SpVec	   *v;
	int			pass;

	if (nitems > (uint32) (MaxAllocSize / (4 * sizeof(ListEdge))))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie query may have at most %d items, not %u",
						(int) (MaxAllocSize / (4 * sizeof(ListEdge))), nitems)));
	edge = palloc(sizeof(ListEdge) * 4 * Max(nitems, 1));
	for (uint32 i = 0; i < nitems; i++)
	{
		uint64		span;
		int64		first;

		if (items[i].lo > items[i].hi)
			continue;
		span = items[i].hi - items[i].lo;
		if (span >= (uint64) lists - 1)
		{
			all++;
			continue;
		}
		first = (int64) (items[i].lo % lists);
		edge[nedges++] = (ListEdge) {first, 1};
		if (first + (int64) span < (int64) lists)
			edge[nedges++] = (ListEdge) {first + (int64) span + 1, -1};
		else
		{
			edge[nedges++] = (ListEdge) {lists, -1};
			edge[nedges++] = (ListEdge) {0, 1};
			edge[nedges++] = (ListEdge) {first + (int64) span + 1 - lists, -1};
		}
	}
	qsort(edge, nedges, sizeof(ListEdge), edge_cmp);

	/* pass 0 counts the lists with a weight, pass 1 fills them in */
	v = NULL;
	for (pass = 0; pass < 2; pass++)
	{
		int			e = 0;

		cur = all;
		from = 0;
		nnz = 0;
		while (from < lists)
		{
			int64		to = e < nedges ? edge[e].at : lists;

			if (cur > 0 && to > from)
			{
				if (pass == 1)
					for (int64 l = from; l < to; l++)
					{
						v->indices[nnz + (l - from)] = (int32) l;
						SPVEC_VALUES(v)[nnz + (l - from)] = (float4) cur;
					}
				nnz += to - from;
			}
			from = Max(from, to);
			if (e >= nedges)
				break;
			for (int64 at = edge[e].at; e < nedges && edge[e].at == at; e++)
				cur += edge[e].delta;
		}
		if (pass == 0)
		{
			if (nnz > SPVEC_MAX_NNZ)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("a genie query may touch at most %d lists", SPVEC_MAX_NNZ)));
			v = spvec_alloc((int) lists, (int) nnz);
		}
	}
	pfree(edge);
	return v;
}

static SpVec *
genie_row(Relation index, Datum value, uint32 dim)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GENIE_KEYWORDS_PROC);
	uint32		nkeys = 0;
	uint64	   *keys;

	keys = (uint64 *) DatumGetPointer(FunctionCall2Coll(proc, index->rd_indcollation[0],
														value, PointerGetDatum(&nkeys)));
	return keys_to_lists(keys, nkeys, index_lists(index, dim));
}

static SpVec *
genie_query(Relation index, ScanKey orderby, uint32 dim)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GENIE_QUERY_PROC);
	uint32		nitems = 0;
	GenieItem  *items;

	items = (GenieItem *) DatumGetPointer(FunctionCall3Coll(proc, index->rd_indcollation[0],
															orderby->sk_argument,
															PointerGetDatum(&nitems),
															Int16GetDatum(orderby->sk_strategy)));
	return genie_query_spvec(items, nitems, index_lists(index, dim));
}

/* the index's counts are the operator's (no recheck) when its lists keep them apart */
static bool
genie_exact(Relation index, uint32 dim)
{
	return dim > 0 && genie_lsh_index_exact(index, dim);
}

static const GpusparseValueMap genie_map = {genie_row, genie_query, true, genie_exact};

static IndexBuildResult *
genie_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	return gpusparse_build_mapped(heap, index, indexInfo, &genie_map);
}

bool
genie_is_genie_index(Relation index)
{
	return index->rd_rel->relkind == RELKIND_INDEX &&
		index->rd_indam != NULL && index->rd_indam->ambuild == genie_build;
}

static bool
genie_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
			 Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
			 IndexInfo *indexInfo)
{
	/* NULL is no value: not indexed, as in every gpuindex AM */
	if (!isnull[0])
		gpusparse_insert_mapped(index, values[0], heap_tid, &genie_map);
	return false;
}

static IndexScanDesc
genie_beginscan(Relation index, int nkeys, int norderbys)
{
	return gpusparse_beginscan_mapped(index, nkeys, norderbys, &genie_map);
}

static IndexBulkDeleteResult *
genie_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	GenieOptions *opts = (GenieOptions *) info->index->rd_options;

	return gpusparse_bulkdelete_limit(info, stats, callback, callback_state,
									  opts ? opts->vacuum_log_limit :
									  GPUSPARSE_DEFAULT_VACUUM_LOG_LIMIT);
}

/*
 * gpusparse's estimate, but an index cannot answer an ORDER BY constant
 * whose parameters (n, the LSH family and its parameters) are not its own:
 * another index or a sequential scan must, so this one costs too much.
 */
static void
genie_costestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				   Cost *startup, Cost *total, Selectivity *selectivity,
				   double *correlation, double *pages)
{
	OpExpr	   *op;
	Const	   *arg;
	Relation	index;
	bool		fits;
	int			strategy;
	Oid			lefttype,
				righttype;

	gpusparse_costestimate(root, path, loop_count, startup, total, selectivity,
						   correlation, pages);
	if (list_length(path->indexorderbys) != 1 || !IsA(linitial(path->indexorderbys), OpExpr))
		return;
	op = linitial(path->indexorderbys);
	if (list_length(op->args) != 2 || !IsA(lsecond(op->args), Const))
		return;
	arg = lsecond(op->args);
	if (arg->constisnull)
		return;
	get_op_opfamily_properties(op->opno, path->indexinfo->opfamily[0], true,
							   &strategy, &lefttype, &righttype);
	index = index_open(path->indexinfo->indexoid, NoLock);
	fits = genie_lsh_query_fits(index, arg->constvalue) &&
		genie_ngram_query_fits(index, strategy, arg->constvalue);
	index_close(index, NoLock);
	if (!fits)
		*startup = *total = DBL_MAX;
}

/* does a support function have nargs arguments and return rettype? */
static bool
check_proc(const char *opclassname, Form_pg_amproc procform, int nargs, Oid rettype,
		   const char *shape)
{
	if (get_func_nargs(procform->amproc) == nargs &&
		get_func_rettype(procform->amproc) == rettype)
		return true;
	ereport(INFO,
			(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
			 errmsg("genie operator class \"%s\" contains invalid support function %s for number %d",
					opclassname, format_procedure(procform->amproc), procform->amprocnum),
			 errdetail("Support function %d is %s.", procform->amprocnum, shape)));
	return false;
}

/*
 * Valid: support functions 1 (coltype, internal) -> internal and 2
 * (internal, internal, int2) -> internal, optionally 3 (the options), and
 * only ORDER BY operators (coltype, any) -> float8.
 */
static bool
genie_validate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opcintype;
	char	   *opclassname;
	CatCList   *proclist,
			   *oprlist;
	bool		have[GENIE_NPROCS + 1] = {false};

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opcintype = classform->opcintype;
	opclassname = NameStr(classform->opcname);

	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(classform->opcfamily));
	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(classform->opcfamily));

	for (int i = 0; i < proclist->n_members; i++)
	{
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(&proclist->members[i]->tuple);
		bool		ok;

		if (procform->amproclefttype != opcintype ||
			procform->amprocrighttype != opcintype)
			continue;
		switch (procform->amprocnum)
		{
			case GENIE_KEYWORDS_PROC:
				ok = check_proc(opclassname, procform, 2, INTERNALOID,
								"(column type, internal) returning internal");
				break;
			case GENIE_QUERY_PROC:
				ok = check_proc(opclassname, procform, 3, INTERNALOID,
								"(internal, internal, smallint) returning internal");
				break;
			case GENIE_OPTIONS_PROC:
				ok = check_amoptsproc_signature(procform->amproc);
				if (!ok)
					ereport(INFO,
							(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
							 errmsg("genie operator class \"%s\" contains invalid options function %s",
									opclassname, format_procedure(procform->amproc))));
				break;
			default:
				ereport(INFO,
						(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
						 errmsg("genie operator class \"%s\" contains support function %s with invalid number %d",
								opclassname, format_procedure(procform->amproc),
								procform->amprocnum)));
				ok = false;
				break;
		}
		if (ok)
			have[procform->amprocnum] = true;
		else
			result = false;
	}
	for (int p = GENIE_KEYWORDS_PROC; p <= GENIE_QUERY_PROC; p++)
		if (!have[p])
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("genie operator class \"%s\" is missing support function %d",
							opclassname, p)));
			result = false;
		}

	if (!gi_validate_orderby_ops("genie", opclassname, opcintype, oprlist, true))
		result = false;

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(classtup);
	return result;
}

Datum
genie_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = gi_am_routine(GENIE_NPROCS);

	amroutine->amoptsprocnum = GENIE_OPTIONS_PROC;
	amroutine->ambuild = genie_build;
	amroutine->ambuildempty = gpusparse_buildempty;
	amroutine->aminsert = genie_insert;
	amroutine->ambulkdelete = genie_bulkdelete;
	amroutine->amcostestimate = genie_costestimate;
	amroutine->amoptions = genie_options;
	amroutine->ambuildphasename = gpusparse_buildphasename;
	amroutine->amvalidate = genie_validate;
	amroutine->ambeginscan = genie_beginscan;
	amroutine->amrescan = gpusparse_rescan;
	amroutine->amgettuple = gpusparse_gettuple;
	amroutine->amendscan = gpusparse_endscan;

	PG_RETURN_POINTER(amroutine);
}
