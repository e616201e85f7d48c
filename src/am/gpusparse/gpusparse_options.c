/*
 * gpusparse_options.c
 *		The gpusparse.* settings and gpusparse's one reloption,
 *		vacuum_log_limit (its store has one list per dimension: nothing
 *		else to tune at CREATE INDEX).
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "utils/guc.h"

#include "gpusparse.h"

int			gpusparse_scan_batch = 100;
int			gpusparse_method = GI_SPARSE_AUTO;

static relopt_kind gpusparse_relopt_kind;

typedef struct GpusparseOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		vacuum_log_limit;
} GpusparseOptions;

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
	gpusparse_add_vacuum_log_limit(gpusparse_relopt_kind);

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

/* the reloption of every access method on gpusparse's pages */
void
gpusparse_add_vacuum_log_limit(relopt_kind kind)
{
	add_int_reloption(kind, "vacuum_log_limit",
					  "Percent of the index's rows VACUUM may keep in its dead-row log "
					  "before it removes them from the pages (0: at every VACUUM)",
					  GPUSPARSE_DEFAULT_VACUUM_LOG_LIMIT, 0, 100,
					  ShareUpdateExclusiveLock);
}

bytea *
gpusparse_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"vacuum_log_limit", RELOPT_TYPE_INT, offsetof(GpusparseOptions, vacuum_log_limit)},
	};

	return (bytea *) build_reloptions(reloptions, validate,
									  gpusparse_relopt_kind,
									  sizeof(GpusparseOptions), tab, lengthof(tab));
}

int
gpusparse_vacuum_log_limit(Relation index)
{
	GpusparseOptions *opts = (GpusparseOptions *) index->rd_options;

	return opts ? opts->vacuum_log_limit : GPUSPARSE_DEFAULT_VACUUM_LOG_LIMIT;
}
