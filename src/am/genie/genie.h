/*
 * genie.h
 *		The genie index access method: rows ranked by how many of a query's
 *		keywords they hold (GENIE's match-count model), one access method
 *		for many types through operator-class support functions.
 *
 * Operator-class support functions turn a value into keywords (64-bit,
 * sorted, distinct); the index keeps a posting list per list number,
 * keyword mod `lists`.  Pages and store are gpusparse's (gpusparse.h): a
 * row is a sparse vector over the lists with weight 1 per list it has a
 * keyword in, and a query one with weight = its keywords in that list, so
 * the store's inner product is a count that is never below the operator's.
 * Scans set xs_recheckorderby and the executor orders by the operator.
 * docs/genie.md has the model and the plan.
 */
#ifndef GENIE_H
#define GENIE_H

#include "postgres.h"

#include "access/amapi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/rel.h"

/* support function 1: (coltype, internal nkeys) -> keywords of a stored value */
#define GENIE_KEYWORDS_PROC		1
/* support function 2: (internal query, internal nitems, int2 strategy) -> items */
#define GENIE_QUERY_PROC		2
/* support function 3 (optional): the operator class's options */
#define GENIE_OPTIONS_PROC		3
#define GENIE_NPROCS			3

#define GENIE_DEFAULT_LISTS		65536

/* the n of the n-gram operator class */
#define GENIE_NGRAM_DEFAULT_N	3
#define GENIE_NGRAM_MAX_N		32

/* the LSH operator classes: families, limits and defaults */
#define GENIE_LSH_E2LSH			1
#define GENIE_LSH_RBIN			2
#define GENIE_LSH_MAX_M			4096
#define GENIE_LSH_MAX_D			(1 << 24)
#define GENIE_LSH_DEFAULT_M		64
#define GENIE_LSH_DEFAULT_D		1024
#define GENIE_LSH_DEFAULT_W		4.0
#define GENIE_LSH_DEFAULT_SIGMA	1.0

/* genie_lsh_functions' domain */
#define GENIE_TAU_MIN_EPSILON	0.01
#define GENIE_TAU_MIN_DELTA		1e-9

/* the most items of a genie_ranges query */
#define GENIE_MAX_RANGES		100000

/* genie_seq_search's limits */
#define GENIE_SEQ_MAX_K			10000
#define GENIE_SEQ_MAX_CANDIDATES 100000
#define GENIE_SEQ_MAX_QUERIES	100000

/* a query item: the keywords lo to hi, one keyword when lo = hi */
typedef struct GenieItem
{
	uint64		lo;
	uint64		hi;
} GenieItem;

typedef struct GenieOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		lists;
	int32		vacuum_log_limit;
} GenieOptions;

/*
 * A query for the n-gram operator class with its own n: the text form is
 * n:string, as genie_ngrams(string, n) builds it.
 */
typedef struct GenieNgramQuery
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		n;
	char		str[FLEXIBLE_ARRAY_MEMBER];
} GenieNgramQuery;

#define GENIE_NGRAM_QUERY_LEN(q)	(VARSIZE(q) - offsetof(GenieNgramQuery, str))

/* m functions of a family, each re-hashed into d lists; width is w or sigma */
typedef struct GenieLshParams
{
	int32		family;
	int32		m;
	int32		d;
	int32		seed;
	float4		width;
} GenieLshParams;

/* an LSH query: a vector with the parameters to hash it with */
typedef struct GenieLshQuery
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	GenieLshParams p;
	int32		dim;
	float4		v[FLEXIBLE_ARRAY_MEMBER];
} GenieLshQuery;

/* a range item of the row operator class: attribute (from 1) in lo..hi */
typedef struct GenieRange
{
	int32		attr;
	int32		lo;
	int32		hi;
} GenieRange;

typedef struct GenieRanges
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		nitems;
	GenieRange	items[FLEXIBLE_ARRAY_MEMBER];
} GenieRanges;

/* genie_handler.c */
extern void genie_init(void);
extern bool genie_is_genie_index(Relation index);
extern struct SpVec *genie_query_spvec(const GenieItem *items, uint32 nitems, uint32 lists);

/* genie_ngram.c */
extern bool genie_is_ngram_index(Relation index);
extern int	genie_ngram_index_n(Relation index);
extern bool genie_ngram_query_fits(Relation index, int strategy, Datum query);

/* genie_lsh.c */
extern bool genie_lsh_query_fits(Relation index, Datum query);
extern bool genie_lsh_index_exact(Relation index, uint32 lists);

/* genie_keys.c */
extern uint64 *genie_sort_unique(uint64 *keys, uint32 *n);
extern uint32 genie_count_common(const uint64 *a, uint32 na, const uint64 *b, uint32 nb);
extern GenieItem *genie_items_of_keys(const uint64 *keys, uint32 nkeys);
extern uint64 *genie_array_keywords(ArrayType *arr, uint32 *n);
extern uint64 *genie_text_word_keywords(text *t, uint32 *n);
extern uint64 *genie_text_ngram_keywords(const char *s, Size len, int n, uint32 *nkeys);
extern void genie_check_ngram_n(int n);

#endif							/* GENIE_H */
