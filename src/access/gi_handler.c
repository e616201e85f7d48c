/*
 * gi_handler.c
 *		What the access methods' handlers and operator-class validators
 *		share: the properties every gpuindex AM has, and the check that an
 *		operator class has only ORDER BY distance operators.
 */
#include "postgres.h"

#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "utils/regproc.h"

#include "gi_access.h"

/*
 * An ordered-scan-only AM over one column, list chains vacuumed by the
 * shared pass: the AM adds its callbacks (and may change a property);
 * those it does not set stay NULL.
 */
IndexAmRoutine *
gi_am_routine(uint16 nprocs)
{
	IndexAmRoutine *am = makeNode(IndexAmRoutine);

	am->amstrategies = 0;
	am->amsupport = nprocs;
	am->amoptsprocnum = 0;
	am->amcanorder = false;
	am->amcanorderbyop = true;
	am->amcanbackward = false;
	am->amcanunique = false;
	am->amcanmulticol = false;
	am->amoptionalkey = true;
	am->amsearcharray = false;
	am->amsearchnulls = false;
	am->amstorage = false;
	am->amclusterable = false;
	am->ampredlocks = false;
	am->amcanparallel = false;
	am->amcaninclude = false;
	am->amusemaintenanceworkmem = false;
	am->amparallelvacuumoptions = VACUUM_OPTION_PARALLEL_BULKDEL;
	am->amkeytype = InvalidOid;
	am->amvacuumcleanup = gi_lists_vacuumcleanup;
	return am;
}

/*
 * Whether an index's routine is a gpuindex AM's: every one comes from
 * gi_am_routine, and none replaces its amvacuumcleanup.
 */
bool
gi_am_is_ours(const IndexAmRoutine *am)
{
	return am != NULL && am->amvacuumcleanup == gi_lists_vacuumcleanup;
}

/*
 * Every operator of the family for opcintype must be an ORDER BY operator
 * (opcintype, opcintype) -> float8, or (opcintype, any type) with
 * any_right; reports each one that is not.
 */
bool
gi_validate_orderby_ops(const char *amname, const char *opclassname,
						Oid opcintype, CatCList *oprlist, bool any_right)
{
	bool		result = true;

	for (int i = 0; i < oprlist->n_members; i++)
	{
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(&oprlist->members[i]->tuple);

		if (oprform->amoplefttype != opcintype)
			continue;
		if (oprform->amoppurpose != AMOP_ORDER ||
			!OidIsValid(oprform->amopsortfamily) ||
			!check_amop_signature(oprform->amopopr, FLOAT8OID,
								  opcintype,
								  any_right ? oprform->amoprighttype : opcintype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("%s operator class \"%s\" contains invalid operator %s: only ORDER BY operators returning double precision are supported",
							amname, opclassname, format_operator(oprform->amopopr))));
			result = false;
		}
	}
	return result;
}
