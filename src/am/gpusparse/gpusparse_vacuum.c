/*
 * gpusparse_vacuum.c
 *		VACUUM of a gpusparse index: the shared pass over list chains
 *		(gi_chain_vacuum.c) on its document chain; amvacuumcleanup is the
 *		shared gi_lists_vacuumcleanup.  A dead row goes to the dead-row
 *		log (its items from the pages once the log is full) and its key
 *		from the store, which drops the row's postings in time
 *		proportional to their number.
 */
#include "postgres.h"

#include "gpusparse.h"

IndexBulkDeleteResult *
gpusparse_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
					 IndexBulkDeleteCallback callback, void *callback_state)
{
	return gpusparse_bulkdelete_limit(info, stats, callback, callback_state,
									  gpusparse_vacuum_log_limit(info->index));
}

/* log_limit: the index's vacuum_log_limit (an AM on these pages has its own) */
IndexBulkDeleteResult *
gpusparse_bulkdelete_limit(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
						   IndexBulkDeleteCallback callback, void *callback_state,
						   int log_limit)
{
	GiListDir	dir;
	GiDeadLogSpec log;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	(void) gpusparse_get_dim(info->index);	/* checks the page version */
	gpusparse_list_dir(&dir);
	gpusparse_deadlog_spec(info->index, log_limit, &log);
	return gi_lists_bulkdelete(info, stats, callback, callback_state, &dir,
							   GPUSPARSE_ITEM_SIZE_MAX(GPUSPARSE_ITEM_MAX_NNZ),
							   &log);
}
