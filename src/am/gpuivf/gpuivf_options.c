/*
 * gpuivf_options.c
 *		The lists reloption and the gpuivf.* settings.
 */
#include "postgres.h"

#include <limits.h>

#include "access/reloptions.h"
#include "utils/guc.h"

#include "gpuivf.h"

int			gpuivf_probes = 10;
int			gpuivf_scan_batch = 100;
int			gpuivf_iterative_scan = GPUIVF_ITERATIVE_OFF;
int			gpuivf_max_probes = GPUIVF_MAX_LISTS;

static const struct config_enum_entry iterative_scan_options[] = {
	{"off", GPUIVF_ITERATIVE_OFF, false},
	{"relaxed_order", GPUIVF_ITERATIVE_RELAXED, false},
	{NULL, 0, false}
};

static relopt_kind gpuivf_relopt_kind;

/*
 * Called from _PG_init: in every process that loads the library, so that
 * the reloption is known before any CREATE INDEX parses it.
 */
void
gpuivf_init(void)
{
	gpuivf_relopt_kind = add_reloption_kind();
	add_int_reloption(gpuivf_relopt_kind, "lists",
					  "Number of inverted lists (k-means clusters)",
					  GPUIVF_DEFAULT_LISTS, GPUIVF_MIN_LISTS, GPUIVF_MAX_LISTS,
					  AccessExclusiveLock);

	DefineCustomIntVariable("gpuivf.probes",
							"Number of lists a gpuivf search scans.",
							"More probes: better recall, slower searches; "
							"probes >= lists makes the search exact.",
							&gpuivf_probes,
							10, 1, GPUIVF_MAX_LISTS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuivf.scan_batch",
							"Rows an ordered gpuivf scan asks the device service for first.",
							"When the query needs more (large LIMIT, filters, invisible rows) "
							"the scan asks again for twice as many and goes on.",
							&gpuivf_scan_batch,
							100, 1, 1000000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("gpuivf.iterative_scan",
							 "Whether an ordered gpuivf scan goes on into more lists.",
							 "relaxed_order: when the probed lists run out before the query "
							 "has its rows (a WHERE filter), the scan probes twice as many "
							 "lists, up to gpuivf.max_probes, and returns their other rows "
							 "after those already returned, so rows may come slightly out of order.",
							 &gpuivf_iterative_scan,
							 GPUIVF_ITERATIVE_OFF, iterative_scan_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuivf.max_probes",
							"Most lists an iterative gpuivf scan probes.",
							"Below gpuivf.probes, gpuivf.probes is used.",
							&gpuivf_max_probes,
							GPUIVF_MAX_LISTS, 1, GPUIVF_MAX_LISTS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("gpuivf");
}

bytea *
gpuivf_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"lists", RELOPT_TYPE_INT, offsetof(GpuivfOptions, lists)},
	};

	return (bytea *) build_reloptions(reloptions, validate,
									  gpuivf_relopt_kind,
									  sizeof(GpuivfOptions),
									  tab, lengthof(tab));
}

int
gpuivf_lists_option(Relation index)
{
	GpuivfOptions *opts = (GpuivfOptions *) index->rd_options;

	return opts ? opts->lists : GPUIVF_DEFAULT_LISTS;
}
