/*
 * gpuivf_vacuum.c
 *		VACUUM of a gpuivf index: the shared pass over the list chains
 *		(gi_chain_vacuum.c) on gpuivf's lists; amvacuumcleanup is the
 *		shared gi_lists_vacuumcleanup.
 */
#include "postgres.h"

#include "gpuivf.h"

IndexBulkDeleteResult *
gpuivf_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				  IndexBulkDeleteCallback callback, void *callback_state)
{
	GpuivfMeta	meta = *gpuivf_get_meta(info->index);
	GiListDir	dir;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	if (meta.lists == 0)
		return stats;
	meta.centroids = meta.cnorms = meta.codebooks = NULL;
	gpuivf_list_dir(&meta, &dir);
	return gi_lists_bulkdelete(info, stats, callback, callback_state, &dir,
							   GPUIVF_RECORD_ITEM_SIZE(gpuivf_record_bytes(&meta)),
							   NULL);
}
