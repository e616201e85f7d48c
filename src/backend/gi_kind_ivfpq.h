/*
 * gi_kind_ivfpq.h
 *		The IVF-PQ kind as the compute backends see it: lists are the cells
 *		of a coarse quantizer (as for IVF), records are product-quantizer
 *		codes of the residual (vector minus its list's centroid).
 *
 * The dim dimensions are split into m sub-spaces of dsub = dim / m
 * consecutive dimensions; each sub-space has a codebook of ksub entries
 * (ksub <= 256).  A record is m codes of code_bits bits each (8: one byte
 * a sub-space; 4, for ksub <= 16: two a byte), packed from the low bits
 * up, so that 32-bit word w holds sub-spaces w * (32 / code_bits) onward,
 * padded with zeros to record_bytes = gi_ivfpq_record_bytes(m, code_bits).
 * For the cosine metric the vectors are scaled to unit length before their
 * residual is taken.
 *
 * State (set_state, once per store): a gi_ivfpq_state, then the nlists *
 * dim centroids, then the m * ksub * dsub codebook floats (sub-space
 * major, then entry, then dimension).  Search parameters: a
 * gi_ivfpq_search_params (IVF's, then the search mode).  Queries: nq * dim
 * floats, as for IVF.
 *
 * Distances (asymmetric: the query is exact, the record its code): with
 * c the list's centroid and e_j the entry of code j,
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

#include <string.h>

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
	uint32_t	code_bits;		/* bits of one code: 8, or 4 when ksub <= 16 */
	uint32_t	pad;
	/* float centroids[nlists * dim], float codebooks[m * ksub * dsub] follow */
} gi_ivfpq_state;

/* code widths a record may use for ksub entries */
static inline bool
gi_ivfpq_code_bits_valid(uint32_t code_bits, uint32_t ksub)
{
	return code_bits == 8 || (code_bits == 4 && ksub <= 16);
}

/* bytes of a record of m codes of code_bits bits, padded to 32-bit words */
static inline uint32_t
gi_ivfpq_record_bytes(uint32_t m, uint32_t code_bits)
{
	return (uint32_t) (((uint64_t) m * code_bits + 31) / 32) * 4;
}

/* code of sub-space s in a packed record */
static inline uint32_t
gi_pq_code_get(const uint8_t *code, uint32_t s, uint32_t code_bits)
{
	if (code_bits == 4)
		return (code[s / 2] >> (4 * (s % 2))) & 0xFu;
	return code[s];
}

/* set the code of sub-space s in a packed record whose bits there are zero */
static inline void
gi_pq_code_put(uint8_t *code, uint32_t s, uint32_t code_bits, uint32_t entry)
{
	if (code_bits == 4)
		code[s / 2] |= (uint8_t) ((entry & 0xFu) << (4 * (s % 2)));
	else
		code[s] = (uint8_t) entry;
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
 * (summed in double, lowest entry on ties).  code gets the packed record
 * (gi_ivfpq_record_bytes(m, code_bits) bytes, zeroed here).
 */
static inline void
gi_pq_encode(const float *codebooks, uint32_t m, uint32_t ksub, uint32_t dsub,
			 uint32_t code_bits, const float *residual, uint8_t *code)
{
	memset(code, 0, gi_ivfpq_record_bytes(m, code_bits));
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
		gi_pq_code_put(code, s, code_bits, bestc);
	}
}

#ifdef __cplusplus
}
#endif

#endif							/* GI_KIND_IVFPQ_H */
