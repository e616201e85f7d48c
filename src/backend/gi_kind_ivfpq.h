/*
 * gi_kind_ivfpq.h
 *		The IVF-PQ kind as the compute backends see it: lists are the cells
 *		of a coarse quantizer (as for IVF), records are product-quantizer
 *		codes of the residual (vector minus its list's centroid).
 *
 * The dim dimensions are split into m sub-spaces of dsub = dim / m
 * consecutive dimensions; each sub-space has a codebook of ksub entries
 * (ksub <= 256).  A record is m code bytes, one per sub-space, padded with
 * zeros to record_bytes = gi_ivfpq_record_bytes(m).  For the cosine metric
 * the vectors are scaled to unit length before their residual is taken.
 *
 * State (set_state, once per store): a gi_ivfpq_state, then the nlists *
 * dim centroids, then the m * ksub * dsub codebook floats (sub-space
 * major, then entry, then dimension).  Search parameters: a
 * gi_ivfpq_search_params (IVF's, then the search mode).  Queries: nq * dim
 * floats, as for IVF.
 *
 * Distances (asymmetric: the query is exact, the record its code): with
 * c the list's centroid and e_j the entry of code byte j,
 *	L2:		sum_j |q_j - c_j - e_j|^2
 *	IP:		-(q.c + sum_j q_j.e_j)
 *	cosine:	1 - (q.c + sum_j q_j.e_j) / |q|	(+Inf for a zero query)
 * where q_j is sub-space j of the query.  The per-list tables hold one
 * float per (sub-space, entry), each summed in double and rounded once;
 * a record's distance sums its m table values and the list's constant in
 * double, sub-space 0 first, rounded once to float.
 */
#ifndef GI_KIND_IVFPQ_H
#define GI_KIND_IVFPQ_H

#include "gi_kind_ivf.h"

#ifdef __cplusplus
extern "C"
{
#endif

#define GI_PQ_MAX_KSUB	256

typedef struct gi_ivfpq_state
{
	gi_ivf_state ivf;			/* dim, metric, nlists: as for IVF */
	uint32_t	m;				/* sub-spaces; divides dim */
	uint32_t	ksub;			/* entries per codebook, 1..GI_PQ_MAX_KSUB */
	/* float centroids[nlists * dim], float codebooks[m * ksub * dsub] follow */
} gi_ivfpq_state;

static inline uint32_t
gi_ivfpq_record_bytes(uint32_t m)
{
	return (m + 3) & ~(uint32_t) 3;
}

static inline size_t
gi_ivfpq_state_size(uint32_t nlists, uint32_t dim, uint32_t ksub)
{
	return sizeof(gi_ivfpq_state) +
		((size_t) nlists * dim + (size_t) ksub * dim) * sizeof(float);
}

static inline const float *
gi_ivfpq_state_centroids(const gi_ivfpq_state *state)
{
	return (const float *) (state + 1);
}

static inline const float *
gi_ivfpq_state_codebooks(const gi_ivfpq_state *state)
{
	return gi_ivfpq_state_centroids(state) + (size_t) state->ivf.nlists * state->ivf.dim;
}

/* whether every centroid and codebook value of a state of that size is finite */
static inline bool
gi_ivfpq_state_finite(const gi_ivfpq_state *state)
{
	size_t		n = (size_t) state->ivf.nlists * state->ivf.dim +
		(size_t) state->ksub * state->ivf.dim;

	return gi_first_nonfinite(gi_ivfpq_state_centroids(state), n) == n;
}

/* how a search scores the codes (gi_pq_select.h for the selective ones) */
typedef enum gi_pq_search_mode
{
	GI_PQ_SEARCH_LUT = 0,		/* every code's table value (the distances above) */
	GI_PQ_SEARCH_JUNO = 1,		/* JUNO: rewards of the entries within a threshold */
	GI_PQ_SEARCH_HITS = 2		/* JUNO's hit counts: inner and outer thresholds */
} gi_pq_search_mode;

typedef struct gi_ivfpq_search_params
{
	gi_ivf_search_params ivf;	/* dim, probes */
	uint32_t	mode;			/* gi_pq_search_mode */
	uint32_t	select;			/* selective modes: entries a threshold keeps, 2^i <= 256 */
	float		scale;			/* selective modes: factor on the density radius, > 0 */
	uint32_t	pad;
} gi_ivfpq_search_params;

/* a selection of entries: a power of two up to GI_PQ_MAX_KSUB */
static inline bool
gi_ivfpq_select_valid(uint32_t select)
{
	return select >= 1 && select <= GI_PQ_MAX_KSUB && (select & (select - 1)) == 0;
}

/* a known mode, a valid selection, a finite positive scale */
static inline bool
gi_ivfpq_mode_valid(const gi_ivfpq_search_params *p)
{
	return p->mode <= GI_PQ_SEARCH_HITS && gi_ivfpq_select_valid(p->select) &&
		p->scale > 0.0f && p->scale < 1e30f;
}

/*
 * The code of a residual: per sub-space the entry nearest in squared L2
 * (summed in double, lowest entry on ties).  code gets m bytes.
 */
static inline void
gi_pq_encode(const float *codebooks, uint32_t m, uint32_t ksub, uint32_t dsub,
			 const float *residual, uint8_t *code)
{
	for (uint32_t s = 0; s < m; s++)
	{
		const float *book = codebooks + (size_t) s * ksub * dsub;
		const float *r = residual + (size_t) s * dsub;
		double		best = 0.0;
		uint32_t	bestc = 0;

		for (uint32_t c = 0; c < ksub; c++)
		{
			double		d = 0.0;

			for (uint32_t j = 0; j < dsub; j++)
			{
				double		t = (double) r[j] - book[(size_t) c * dsub + j];

				d += t * t;
			}
			if (c == 0 || d < best)
			{
				best = d;
				bestc = c;
			}
		}
		code[s] = (uint8_t) bestc;
	}
}

#ifdef __cplusplus
}
#endif

#endif							/* GI_KIND_IVFPQ_H */
