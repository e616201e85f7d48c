/*
 * gi_kind_sparse.h
 *		The sparse kind as the compute backends see it: one list per
 *		dimension (term), one record per non-zero of a document, holding
 *		its weight; a document is a key owning one record in each of its
 *		terms' lists (GI_KEYS_PER_LIST).
 *
 * State (set_state, once per store): a gi_sparse_state.  Search
 * parameters: a gi_sparse_search_params.  Queries: nq queries packed back
 * to back, each a uint32 nnz, then nnz uint32 terms (strictly ascending,
 * each < dim), then nnz float weights; gi_sparse_query_bytes gives a
 * query's size.  (An index of more dimensions than a store has lists
 * names terms instead in its requests; the device service maps them to
 * lists, src/service/kinds/sparse.c, before a backend sees them.)
 *
 * Score and order: a document's score for a query is the sum over the
 * query's terms t of weight(query, t) * weight(document, t), each product
 * of two floats formed and summed in double, the sum rounded to float
 * (the order of the terms in the sum does not matter at that precision).
 * A hit's distance is the negated score, and hits come in ascending
 * (distance, key) order, as for every kind.  The candidates are the
 * documents with at least one record in a query term's list: a document
 * sharing no term with the query is never a hit (its score is 0; the
 * access method finds those itself).  found[q] < k therefore means every
 * candidate of query q was returned.
 *
 * List bounds (list_bounds): per list, the largest |weight| of the records
 * inserted since the store was created; deletes leave it as an upper bound
 * (a reload recomputes it).  Pruning may rely on it never being smaller
 * than a live record's |weight|.
 */
#ifndef GI_KIND_SPARSE_H
#define GI_KIND_SPARSE_H

#include "gi_backend.h"

#ifdef __cplusplus
extern "C"
{
#endif

typedef struct gi_sparse_state
{
	uint32_t	dim;			/* == the store's nlists; record_bytes == 4 */
	uint32_t	terms;			/* 0: a term is its list; else the index's
								 * dimension, above GI_SPARSE_MAX_LISTS, whose
								 * terms the device service maps to lists
								 * before a backend sees them */
} gi_sparse_state;

/* lists a sparse store may have: one per dimension, or per term in use */
#define GI_SPARSE_MAX_LISTS		(1u << 24)

/* how a backend computes the scores (the CUDA backend has two kernels) */
typedef enum gi_sparse_method
{
	GI_SPARSE_AUTO = 0,			/* the backend chooses */
	GI_SPARSE_TERM = 1,			/* term-parallel scatter-add */
	GI_SPARSE_DOC = 2,			/* document-parallel */
	GI_SPARSE_COUNT = 3			/* counting: when every record of the query
								 * terms' lists weighs 1 and the query
								 * weights are whole numbers (else as AUTO);
								 * AUTO counts whenever it can */
} gi_sparse_method;

typedef struct gi_sparse_search_params
{
	uint32_t	dim;			/* == the state's dim */
	uint32_t	method;			/* gi_sparse_method; the host counts (GI_SPARSE_COUNT)
								 * whenever it can, unless TERM or DOC */
} gi_sparse_search_params;

static inline size_t
gi_sparse_query_bytes(uint32_t nnz)
{
	return sizeof(uint32_t) + (size_t) nnz * (sizeof(uint32_t) + sizeof(float));
}

/* raise bound[list] to the |weight| of each record; both backends keep it so */
static inline void
gi_sparse_bound_note(float *bound, uint32_t nlists, uint32_t n,
					 const uint32_t *lists, const void *payloads)
{
	const float *w = (const float *) payloads;

	for (uint32_t i = 0; i < n; i++)
	{
		float		a = w[i] < 0 ? -w[i] : w[i];

		if (lists[i] < nlists && a > bound[lists[i]])
			bound[lists[i]] = a;
	}
}

/*
 * The counting paths (GI_SPARSE_COUNT) need every record of a query's
 * lists to weigh 1: unit[list] (1 when created) drops to 0 for good once
 * a record of another weight is inserted into the list.
 */
static inline void
gi_sparse_unit_note(uint8_t *unit, uint32_t nlists, uint32_t n,
					const uint32_t *lists, const void *payloads)
{
	const float *w = (const float *) payloads;

	for (uint32_t i = 0; i < n; i++)
		if (lists[i] < nlists && w[i] != 1.0f)
			unit[lists[i]] = 0;
}

/*
 * Can a query be counted: every weight a whole number from 1, summing to at
 * most max, and every record of its lists weighing 1?  Returns the sum (a
 * row's highest count), or 0 when it cannot.
 */
static inline uint32_t
gi_sparse_count_sum(const uint8_t *unit, uint32_t nnz, const uint32_t *terms,
					const float *weights, uint32_t max)
{
	uint32_t	sum = 0;

	for (uint32_t j = 0; j < nnz; j++)
	{
		float		w = weights[j];

		if (!(w >= 1.0f && w <= (float) max) || w != (float) (uint32_t) w ||
			!unit[terms[j]])
			return 0;
		sum += (uint32_t) w;
		if (sum > max)
			return 0;
	}
	return sum;
}

#ifdef __cplusplus
}
#endif

#endif							/* GI_KIND_SPARSE_H */
