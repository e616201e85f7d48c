/*
 * gpuivf_options.c
 *		The lists and quantizer reloptions and the gpuivf.* settings.
 */
#include "postgres.h"

#include <limits.h>

#include "access/reloptions.h"
#include "utils/guc.h"

#include "gpuivf.h"
#include "gi_kind_ivfpq.h"

int			gpuivf_probes = 10;
int			gpuivf_scan_batch = 100;
int			gpuivf_iterative_scan = GPUIVF_ITERATIVE_OFF;
int			gpuivf_max_probes = GPUIVF_MAX_LISTS;
int			gpuivf_pq_rerank = 0;
int			gpuivf_pq_search = GI_PQ_SEARCH_LUT;
int			gpuivf_pq_select = 64;
double		gpuivf_pq_threshold_scale = 1.0;

static const struct config_enum_entry pq_search_options[] = {
	{"lut", GI_PQ_SEARCH_LUT, false},
	{"juno", GI_PQ_SEARCH_JUNO, false},
	{"hits", GI_PQ_SEARCH_HITS, false},
	{NULL, 0, false}
};

static bool
check_pq_select(int *newval, void **extra, GucSource source)
{
	if (*newval < 1 || !gi_ivfpq_select_valid((uint32) *newval))
	{
		GUC_check_errdetail("gpuivf.pq_select must be a power of two (1, 2, 4, ..., 256).");
		return false;
	}
	return true;
}

static const struct config_enum_entry iterative_scan_options[] = {
	{"off", GPUIVF_ITERATIVE_OFF, false},
	{"relaxed_order", GPUIVF_ITERATIVE_RELAXED, false},
	{NULL, 0, false}
};

static relopt_kind gpuivf_relopt_kind;

static void
validate_quantizer(const char *value)
{
	if (value != NULL && strcmp(value, "flat") != 0 && strcmp(value, "pq") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for gpuivf option \"quantizer\": \"%s\"", value),
				 errdetail("Valid values are \"flat\" and \"pq\".")));
}

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
	add_string_reloption(gpuivf_relopt_kind, "quantizer",
						 "How the lists store their rows: flat (the vectors) or pq (product-quantizer codes)",
						 "flat", validate_quantizer, AccessExclusiveLock);
	/* 0, out of range for a user, stands for "not given" */
	add_int_reloption(gpuivf_relopt_kind, "pq_m",
					  "Sub-spaces of the product quantizer (default: half the dimension)",
					  0, 1, GPUIVF_MAX_DIM, AccessExclusiveLock);
	add_int_reloption(gpuivf_relopt_kind, "pq_bits",
					  "Bits per sub-space code of the product quantizer (2^pq_bits codebook entries)",
					  0, GPUIVF_MIN_PQ_BITS, GPUIVF_MAX_PQ_BITS, AccessExclusiveLock);

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

	DefineCustomIntVariable("gpuivf.pq_rerank",
							"Candidates per row an ordered scan of a pq gpuivf index re-ranks by exact distance.",
							"0: rows come in product-quantizer distance order.  N > 0: the scan takes "
							"the N * gpuivf.scan_batch nearest rows by code, computes their exact "
							"distances from the table's vectors and returns them in that order.",
							&gpuivf_pq_rerank,
							0, 0, 1000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("gpuivf.pq_search",
							 "How a search of a pq gpuivf index scores the codes.",
							 "lut: every code's look-up-table distance (plain IVF-PQ); "
							 "juno: only the codebook entries within a threshold of the query count "
							 "(JUNO's selective search); hits: JUNO's hit counts, two thresholds.",
							 &gpuivf_pq_search,
							 GI_PQ_SEARCH_LUT, pq_search_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuivf.pq_select",
							"Codebook entries near the query that set each sub-space's threshold in the juno and hits searches.",
							"A power of two: the threshold takes in the nearest entry's pq_select nearest "
							"entries (hits: a quarter of them for the inner threshold).  More: better recall, more work.",
							&gpuivf_pq_select,
							64, 1, GI_PQ_MAX_KSUB,
							PGC_USERSET,
							0,
							check_pq_select, NULL, NULL);

	DefineCustomRealVariable("gpuivf.pq_threshold_scale",
							 "Factor on the density radius of the juno and hits thresholds.",
							 "Above 1 the thresholds take in more entries, below 1 fewer.",
							 &gpuivf_pq_threshold_scale,
							 1.0, 0.01, 100.0,
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
		{"quantizer", RELOPT_TYPE_STRING, offsetof(GpuivfOptions, quantizer)},
		{"pq_m", RELOPT_TYPE_INT, offsetof(GpuivfOptions, pq_m)},
		{"pq_bits", RELOPT_TYPE_INT, offsetof(GpuivfOptions, pq_bits)},
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

/*
 * The quantizer of an index whose rows have dim dimensions: flat, or pq
 * with pq_m sub-spaces (default dim / 2, or dim when dim is odd) of
 * 2^pq_bits entries.  Options that do not fit are refused here, when the
 * dimension is known (CREATE INDEX, or the first row of an index built
 * empty).
 */
GpuivfQuantizer
gpuivf_quantizer_option(Relation index, uint32 dim)
{
	GpuivfOptions *opts = (GpuivfOptions *) index->rd_options;
	const char *name = opts && opts->quantizer ? (const char *) opts + opts->quantizer : "flat";
	GpuivfQuantizer q;

	memset(&q, 0, sizeof(q));
	if (strcmp(name, "pq") != 0)
	{
		if (opts && (opts->pq_m != 0 || opts->pq_bits != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("gpuivf options pq_m and pq_bits need quantizer = 'pq'")));
		q.quantizer = GPUIVF_QUANTIZER_FLAT;
		return q;
	}
	q.quantizer = GPUIVF_QUANTIZER_PQ;
	if (opts && opts->pq_m != 0)
		q.pq_m = (uint32) opts->pq_m;
	else
		q.pq_m = dim % 2 == 0 ? dim / 2 : dim;
	q.pq_ksub = 1U << (opts && opts->pq_bits != 0 ? opts->pq_bits : GPUIVF_DEFAULT_PQ_BITS);
	q.pq_code_bits = q.pq_ksub <= 16 ? 4 : 8;
	if (dim > 0 && (q.pq_m > dim || dim % q.pq_m != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gpuivf option pq_m = %u must divide the dimension %u",
						q.pq_m, dim)));
	return q;
}
