/*
 * gpusparse_vacuum.c
 *		VACUUM of a gpusparse index: the shared pass over list chains
 *		(gi_chain_vacuum.c) on its document chain; amvacuumcleanup is the
 *		shared gi_lists_vacuumcleanup.  A dead row's items go from the
 *		pages and its key from the store, which drops the row's postings
 *		in time proportional to their number.
 */
#include "postgres.h"

#include "gpusparse.h"

IndexBulkDeleteResult *
gpusparse_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
					 IndexBulkDeleteCallback callback, void *callback_state)
{
	GiListDir	dir;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	gpusparse_list_dir(&dir);
	return gi_lists_bulkdelete(info, stats, callback, callback_state, &dir,
							   GPUSPARSE_ITEM_SIZE_MAX(GPUSPARSE_ITEM_MAX_NNZ));
}
