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
/* support function 2: (internal query, internal nkeys, int2 strategy) -> keywords */
#define GENIE_QUERY_PROC		2
/* support function 3 (optional): the operator class's options */
#define GENIE_OPTIONS_PROC		3
#define GENIE_NPROCS			3

#define GENIE_DEFAULT_LISTS		65536

/* the n of the n-gram operator class */
#define GENIE_NGRAM_DEFAULT_N	3
#define GENIE_NGRAM_MAX_N		32

/* genie_seq_search's limits */
#define GENIE_SEQ_MAX_K			10000
#define GENIE_SEQ_MAX_CANDIDATES 100000
#define GENIE_SEQ_MAX_QUERIES	100000

typedef struct GenieOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		lists;
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

/* genie_handler.c */
extern void genie_init(void);
extern bool genie_is_genie_index(Relation index);
extern struct SpVec *genie_query_spvec(const uint64 *keys, uint32 nkeys, uint32 lists);

/* genie_ngram.c */
extern bool genie_is_ngram_index(Relation index);
extern int	genie_ngram_index_n(Relation index);

/* genie_keys.c */
extern uint64 *genie_sort_unique(uint64 *keys, uint32 *n);
extern uint32 genie_count_common(const uint64 *a, uint32 na, const uint64 *b, uint32 nb);
extern uint64 *genie_array_keywords(ArrayType *arr, uint32 *n);
extern uint64 *genie_text_word_keywords(text *t, uint32 *n);
extern uint64 *genie_text_ngram_keywords(const char *s, Size len, int n, uint32 *nkeys);
extern void genie_check_ngram_n(int n);

#endif							/* GENIE_H */
