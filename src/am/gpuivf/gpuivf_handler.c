/*
 * gpuivf_handler.c
 *		The access method handler, operator-class validation, and the
 *		operator-class support functions.
 *
 * The AM never assumes its column is real[]: support function 1 turns a
 * column value (and an ORDER BY argument) into a real[] and support
 * function 2 names the metric.  An operator class for another vector type
 * (pgvector's vector or halfvec) needs only a conversion function.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_class.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/progress.h"
#include "commands/vacuum.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "gpuivf.h"
#include "vecarray.h"

PG_FUNCTION_INFO_V1(gpuivf_handler);
PG_FUNCTION_INFO_V1(gpuivf_real_to_floats);
PG_FUNCTION_INFO_V1(gpuivf_metric_l2);
PG_FUNCTION_INFO_V1(gpuivf_metric_ip);
PG_FUNCTION_INFO_V1(gpuivf_metric_cosine);

/* ---- support functions of the real[] operator classes ---- */

/* support function 1 for real[]: the value itself, detoasted */
Datum
gpuivf_real_to_floats(PG_FUNCTION_ARGS)
{
	PG_RETURN_ARRAYTYPE_P(PG_GETARG_ARRAYTYPE_P(0));
}

/* support function 2: the metric code (gi_metric) */
Datum
gpuivf_metric_l2(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GI_METRIC_L2);
}

Datum
gpuivf_metric_ip(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GI_METRIC_IP);
}

Datum
gpuivf_metric_cosine(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GI_METRIC_COSINE);
}

/* ---- helpers used across the AM ---- */

/*
 * A column value or ORDER BY argument as validated floats, through the
 * operator class's support function 1.  The result points into memory of
 * the current context (or into the value itself).
 */
const float4 *
gpuivf_datum_floats(Relation index, Datum value, int *dim, const char *what)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GPUIVF_FLOATS_PROC);
	Datum		arr;
	const float4 *vec;

	arr = FunctionCall1Coll(proc, index->rd_indcollation[0], value);
	vec = gi_array_floats(DatumGetArrayTypeP(arr), dim, what);
	gpuivf_check_magnitude(vec, *dim, what);
	return vec;
}

/*
 * The service ranks by float distances (the CUDA kernels also sum in
 * float).  A vector whose squared norm passes FLT_MAX / 4 can make a
 * distance or a norm overflow to infinity, and one whose squared norm is
 * below FLT_MIN makes the distances between such vectors underflow to
 * zero: either way rows would tie where a sequential scan in double orders
 * them.  Such vectors are refused under every metric (a zero vector is
 * fine); docs/usage.md says so.
 */
void
gpuivf_check_magnitude(const float4 *vec, int dim, const char *what)
{
	double		norm2 = 0.0;

	for (int i = 0; i < dim; i++)
		norm2 += (double) vec[i] * vec[i];
	if (norm2 > (double) FLT_MAX / 4.0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s is too large for a gpuivf index: its norm is %g", what, sqrt(norm2)),
				 errdetail("Distances between vectors of norm above %g overflow single precision.",
						   sqrt((double) FLT_MAX / 4.0)),
				 errhint("Scale the vectors; with cosine distance any scale gives the same order.")));
	if (norm2 > 0.0 && norm2 < (double) FLT_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s is too small for a gpuivf index: its norm is %g", what, sqrt(norm2)),
				 errdetail("Distances between vectors of norm below %g underflow single precision.",
						   sqrt((double) FLT_MIN)),
				 errhint("Scale the vectors; with cosine distance any scale gives the same order.")));
}

uint32
gpuivf_opclass_metric(Relation index)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GPUIVF_METRIC_PROC);
	int32		metric;

	metric = DatumGetInt32(FunctionCall0Coll(proc, InvalidOid));
	if (metric != GI_METRIC_L2 && metric != GI_METRIC_IP &&
		metric != GI_METRIC_COSINE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("gpuivf support function 2 of index \"%s\" returned unknown metric %d",
						RelationGetRelationName(index), metric)));
	return (uint32) metric;
}

bool
gpuivf_is_gpuivf_index(Relation index)
{
	return index->rd_rel->relkind == RELKIND_INDEX &&
		index->rd_indam != NULL && index->rd_indam->ambuild == gpuivf_build;
}

/*
 * The service's distance turned into the value the ORDER BY operator
 * returns: the service ranks squared L2 (the operator is its square root)
 * and answers +Inf for cosine against a zero vector (the operator says
 * NaN).  The service computes in double and rounds once to float, so the
 * values agree with the operators' to float precision.
 */
double
gpuivf_distance_value(uint32 metric, float distance)
{
	switch (metric)
	{
		case GI_METRIC_L2:
			return sqrt((double) distance);
		case GI_METRIC_COSINE:
			if (isinf(distance))
				return get_float8_nan();
			if (distance < 0.0f)
				return 0.0;
			if (distance > 2.0f)
				return 2.0;
			return (double) distance;
		default:
			return (double) distance;
	}
}

/*
 * Vectors with no direction have no cosine distance to anything (the
 * operator says NaN): like pgvector, the cosine opclass does not index
 * them, so an index scan never returns them.
 */
bool
gpuivf_vector_indexable(uint32 metric, const float4 *vec, int dim)
{
	if (metric != GI_METRIC_COSINE)
		return true;
	for (int i = 0; i < dim; i++)
		if (vec[i] != 0.0f)
			return true;
	return false;
}

void
gpuivf_check_dim(const GpuivfMeta *meta, int dim)
{
	if (meta->dim != 0 && (int) meta->dim != dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("expected %u dimensions, not %d", meta->dim, dim),
				 errdetail("The gpuivf index holds vectors of %u dimensions.",
						   meta->dim)));
}

/* ---- the AM's catalog-facing callbacks ---- */

static char *
gpuivf_buildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case GPUIVF_PHASE_SAMPLE:
			return "sampling table";
		case GPUIVF_PHASE_KMEANS:
			return "performing k-means";
		case GPUIVF_PHASE_ASSIGN:
			return "assigning tuples";
		case GPUIVF_PHASE_WRITE:
			return "writing index pages";
		case GPUIVF_PHASE_LOAD:
			return "loading into device service";
		default:
			return NULL;
	}
}

/*
 * An operator class is valid when it has support function 1 (opcintype)
 * -> real[], support function 2 () -> int4, and only ORDER BY operators
 * (opcintype, opcintype) -> float8.
 */
static bool
gpuivf_validate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opfamilyoid;
	Oid			opcintype;
	char	   *opclassname;
	CatCList   *proclist,
			   *oprlist;
	bool		have_proc[GPUIVF_NPROCS + 1] = {false};

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opfamilyoid = classform->opcfamily;
	opcintype = classform->opcintype;
	opclassname = NameStr(classform->opcname);

	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamilyoid));
	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamilyoid));

	for (int i = 0; i < proclist->n_members; i++)
	{
		HeapTuple	proctup = &proclist->members[i]->tuple;
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(proctup);
		bool		ok;

		if (procform->amproclefttype != opcintype ||
			procform->amprocrighttype != opcintype)
			continue;			/* another member type of the family */

		switch (procform->amprocnum)
		{
			case GPUIVF_FLOATS_PROC:
				ok = check_amproc_signature(procform->amproc, FLOAT4ARRAYOID,
											true, 1, 1, opcintype);
				break;
			case GPUIVF_METRIC_PROC:
				ok = check_amproc_signature(procform->amproc, INT4OID,
											true, 0, 0);
				break;
			default:
				ereport(INFO,
						(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
						 errmsg("gpuivf operator class \"%s\" contains invalid support function number %d",
								opclassname, procform->amprocnum)));
				result = false;
				continue;
		}
		if (!ok)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("gpuivf operator class \"%s\" contains function %s with wrong signature for support number %d",
							opclassname,
							format_procedure(procform->amproc),
							procform->amprocnum)));
			result = false;
		}
		have_proc[procform->amprocnum] = true;
	}

	for (int n = 1; n <= GPUIVF_NPROCS; n++)
		if (!have_proc[n])
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("gpuivf operator class \"%s\" is missing support function %d",
							opclassname, n)));
			result = false;
		}

	if (!gi_validate_orderby_ops("gpuivf", opclassname, opcintype, oprlist, false))
		result = false;

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(classtup);
	return result;
}

Datum
gpuivf_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = gi_am_routine(GPUIVF_NPROCS);

	amroutine->amusemaintenanceworkmem = true;	/* its k-means samples */
	amroutine->ambuild = gpuivf_build;
	amroutine->ambuildempty = gpuivf_buildempty;
	amroutine->aminsert = gpuivf_insert;
	amroutine->ambulkdelete = gpuivf_bulkdelete;
	amroutine->amcostestimate = gpuivf_costestimate;
	amroutine->amoptions = gpuivf_options;
	amroutine->ambuildphasename = gpuivf_buildphasename;
	amroutine->amvalidate = gpuivf_validate;
	amroutine->ambeginscan = gpuivf_beginscan;
	amroutine->amrescan = gpuivf_rescan;
	amroutine->amgettuple = gpuivf_gettuple;
	amroutine->amendscan = gpuivf_endscan;

	PG_RETURN_POINTER(amroutine);
}
