/*
 * gpusparse_handler.c
 *		The access method handler, operator-class validation, and the
 *		helpers that turn a column value into a checked spvec.
 *
 * The AM never assumes its column is spvec: support function 1 turns a
 * column value (and an ORDER BY argument) into one, so that an operator
 * class for another sparse type (pgvector's sparsevec) needs only a
 * conversion function.
 */
#include "postgres.h"

#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/progress.h"
#include "commands/vacuum.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "gpusparse.h"

PG_FUNCTION_INFO_V1(gpusparse_handler);
PG_FUNCTION_INFO_V1(gpusparse_spvec_identity);

/* support function 1 for spvec: the value itself, detoasted */
Datum
gpusparse_spvec_identity(PG_FUNCTION_ARGS)
{
	PG_RETURN_SPVEC_P(PG_GETARG_SPVEC_P(0));
}

/* a column value or ORDER BY argument as an spvec (support function 1) */
SpVec *
gpusparse_datum_spvec(Relation index, Datum value)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GPUSPARSE_SPVEC_PROC);

	return DatumGetSpVecP(FunctionCall1Coll(proc, index->rd_indcollation[0], value));
}

static SpVec *
spvec_row(Relation index, Datum value, uint32 dim)
{
	return gpusparse_datum_spvec(index, value);
}

static SpVec *
spvec_query(Relation index, ScanKey orderby, uint32 dim)
{
	return gpusparse_datum_spvec(index, orderby->sk_argument);
}

/* gpusparse's own: support function 1, distances exact */
const GpusparseValueMap gpusparse_spvec_map = {spvec_row, spvec_query, false, NULL};

bool
gpusparse_is_gpusparse_index(Relation index)
{
	return index->rd_rel->relkind == RELKIND_INDEX &&
		index->rd_indam != NULL && index->rd_indam->ambuild == gpusparse_build;
}

/*
 * A row's or query's dimension against the index's (0: not fixed yet); any
 * dimension spvec takes is indexable.
 */
void
gpusparse_check_dim(Relation index, uint32 dim, int got)
{
	if (dim != 0 && (int) dim != got)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("expected %u dimensions, not %d", dim, got),
				 errdetail("The gpusparse index \"%s\" holds vectors of %u dimensions.",
						   RelationGetRelationName(index), dim)));
}

char *
gpusparse_buildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case GPUSPARSE_PHASE_WRITE:
			return "writing index pages";
		case GPUSPARSE_PHASE_LOAD:
			return "loading into device service";
		default:
			return NULL;
	}
}

/* is typid the type named spvec? */
static bool
is_spvec_type(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	bool		is;

	if (!HeapTupleIsValid(tup))
		return false;
	is = strcmp(NameStr(((Form_pg_type) GETSTRUCT(tup))->typname), "spvec") == 0;
	ReleaseSysCache(tup);
	return is;
}

/*
 * An operator class is valid when it has support function 1 (opcintype)
 * -> spvec and only ORDER BY operators (opcintype, opcintype) -> float8.
 */
static bool
gpusparse_validate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opcintype;
	char	   *opclassname;
	CatCList   *proclist,
			   *oprlist;
	bool		have_proc = false;

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

		if (procform->amproclefttype != opcintype ||
			procform->amprocrighttype != opcintype)
			continue;
		if (procform->amprocnum != GPUSPARSE_SPVEC_PROC ||
			!is_spvec_type(get_func_rettype(procform->amproc)) ||
			get_func_nargs(procform->amproc) != 1)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("gpusparse operator class \"%s\" contains invalid support function %s for number %d",
							opclassname, format_procedure(procform->amproc),
							procform->amprocnum),
					 errdetail("Support function 1 takes the column's type and returns spvec.")));
			result = false;
			continue;
		}
		have_proc = true;
	}
	if (!have_proc)
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("gpusparse operator class \"%s\" is missing support function 1",
						opclassname)));
		result = false;
	}

	if (!gi_validate_orderby_ops("gpusparse", opclassname, opcintype, oprlist, false))
		result = false;

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(classtup);
	return result;
}

Datum
gpusparse_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = gi_am_routine(GPUSPARSE_NPROCS);

	amroutine->ambuild = gpusparse_build;
	amroutine->ambuildempty = gpusparse_buildempty;
	amroutine->aminsert = gpusparse_insert;
	amroutine->ambulkdelete = gpusparse_bulkdelete;
	amroutine->amcostestimate = gpusparse_costestimate;
	amroutine->amoptions = gpusparse_options;
	amroutine->ambuildphasename = gpusparse_buildphasename;
	amroutine->amvalidate = gpusparse_validate;
	amroutine->ambeginscan = gpusparse_beginscan;
	amroutine->amrescan = gpusparse_rescan;
	amroutine->amgettuple = gpusparse_gettuple;
	amroutine->amendscan = gpusparse_endscan;

	PG_RETURN_POINTER(amroutine);
}
