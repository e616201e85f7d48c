/*
 * genie_handler.c
 *		The genie access method: handler, options, operator-class
 *		validation, and the value map that puts keywords into gpusparse's
 *		pages and store.
 *
 * A keyword goes to list keyword mod lists.  A row becomes a sparse vector
 * over the lists with weight 1 on each list it has a keyword in; a query,
 * one with weight = the number of its keywords in that list.  Their inner
 * product counts, for each query keyword, whether the row has some keyword
 * in the same list: at least the number of keywords they share, so the
 * index's distance (minus that product) never exceeds the operator's, and
 * the scan asks the executor to recheck and reorder.
 */
#include "postgres.h"

#include "access/amvalidate.h"
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
					  GENIE_DEFAULT_LISTS, 1, GPUSPARSE_MAX_DIM, AccessExclusiveLock);
}

static bytea *
genie_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"lists", RELOPT_TYPE_INT, offsetof(GenieOptions, lists)},
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

/*
 * The sparse vector of keys over lists: with per_key, weight = the number
 * of keys in a list; otherwise 1 on every list that has one.
 */
static SpVec *
keys_to_lists(const uint64 *keys, uint32 nkeys, uint32 lists, bool per_key)
{
	int32	   *l = palloc(sizeof(int32) * Max(nkeys, 1));
	SpVec	   *v;
	float4	   *w;
	int			nnz = 0;

	if (nkeys > (uint32) SPVEC_MAX_NNZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie value may have at most %d keywords, not %u",
						SPVEC_MAX_NNZ, nkeys)));
	for (uint32 i = 0; i < nkeys; i++)
		l[i] = (int32) (keys[i] % lists);
	qsort(l, nkeys, sizeof(int32), list_cmp);
	v = spvec_alloc((int) lists, (int) nkeys);
	w = SPVEC_VALUES(v);
	for (uint32 i = 0; i < nkeys; i++)
	{
		if (nnz > 0 && v->indices[nnz - 1] == l[i])
		{
			if (per_key)
				w[nnz - 1] += 1.0f;
			continue;
		}
		v->indices[nnz] = l[i];
		w[nnz] = 1.0f;
		nnz++;
	}
	/* the values go right after the nnz indices */
	if (nnz < (int) nkeys)
		memmove(v->indices + nnz, w, sizeof(float4) * nnz);
	v->nnz = nnz;
	SET_VARSIZE(v, SPVEC_SIZE(nnz));
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
	return keys_to_lists(keys, nkeys, index_lists(index, dim), false);
}

/* a query's keywords as the store searches them */
SpVec *
genie_query_spvec(const uint64 *keys, uint32 nkeys, uint32 lists)
{
	return keys_to_lists(keys, nkeys, lists, true);
}

static SpVec *
genie_query(Relation index, ScanKey orderby, uint32 dim)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GENIE_QUERY_PROC);
	uint32		nkeys = 0;
	uint64	   *keys;

	keys = (uint64 *) DatumGetPointer(FunctionCall3Coll(proc, index->rd_indcollation[0],
														orderby->sk_argument,
														PointerGetDatum(&nkeys),
														Int16GetDatum(orderby->sk_strategy)));
	return keys_to_lists(keys, nkeys, index_lists(index, dim), true);
}

static const GpusparseValueMap genie_map = {genie_row, genie_query, true};

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
	amroutine->ambulkdelete = gpusparse_bulkdelete;
	amroutine->amcostestimate = gpusparse_costestimate;
	amroutine->amoptions = genie_options;
	amroutine->ambuildphasename = gpusparse_buildphasename;
	amroutine->amvalidate = genie_validate;
	amroutine->ambeginscan = genie_beginscan;
	amroutine->amrescan = gpusparse_rescan;
	amroutine->amgettuple = gpusparse_gettuple;
	amroutine->amendscan = gpusparse_endscan;

	PG_RETURN_POINTER(amroutine);
}
