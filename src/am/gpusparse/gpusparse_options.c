/*
 * gpusparse_options.c
 *		The gpusparse.* settings; gpusparse has no reloptions (its store
 *		has one list per dimension, nothing to tune at CREATE INDEX).
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "utils/guc.h"

#include "gpusparse.h"

int			gpusparse_scan_batch = 100;
int			gpusparse_method = GI_SPARSE_AUTO;

static relopt_kind gpusparse_relopt_kind;

static const struct config_enum_entry method_options[] = {
	{"auto", GI_SPARSE_AUTO, false},
	{"term", GI_SPARSE_TERM, false},
	{"doc", GI_SPARSE_DOC, false},
	{"count", GI_SPARSE_COUNT, false},
	{NULL, 0, false}
};

/* called from _PG_init, in every process that loads the library */
void
gpusparse_init(void)
{
	gpusparse_relopt_kind = add_reloption_kind();

	DefineCustomIntVariable("gpusparse.scan_batch",
							"Rows an ordered gpusparse scan asks the device service for first.",
							"When the query needs more (large LIMIT, filters, invisible rows) "
							"the scan asks again for four times as many and goes on.",
							&gpusparse_scan_batch,
							100, 1, 1000000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("gpusparse.method",
							 "How the CUDA backend scores sparse queries.",
							 "term: term-parallel scatter-add; doc: document-parallel; "
							 "count: small counters when the scores are counts (genie); "
							 "auto: the backend chooses by the batch's shape, counting when it can.  "
							 "Results are the same; the host backend ignores it.",
							 &gpusparse_method,
							 GI_SPARSE_AUTO, method_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("gpusparse");
}

bytea *
gpusparse_options(Datum reloptions, bool validate)
{
	return (bytea *) build_reloptions(reloptions, validate,
									  gpusparse_relopt_kind,
									  sizeof(int32), NULL, 0);
}
