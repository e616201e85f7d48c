/*
 * cuda_ivfpq.h
 *		The IVF-PQ kind of the CUDA backend (layouts and distances in
 *		gi_kind_ivfpq.h): its per-store state, the IVF kind's state (the
 *		coarse quantizer's centroids and the search scratch) with the
 *		codebooks next to it, and the entry points between its files:
 *		cuda_ivfpq.cu (the kind's entries), cuda_ivfpq_scan.cu (look-up
 *		tables, fine scan, top-k).
 */
#ifndef GI_CUDA_IVFPQ_H
#define GI_CUDA_IVFPQ_H

#include "cuda_ivf.h"
#include "gi_kind_ivfpq.h"

struct gi_cu_ivfpq
{
	gi_cu_ivf	ivf;			/* dim, metric, centroids, search scratch */
	uint32_t	m;				/* sub-spaces */
	uint32_t	ksub;			/* entries per codebook */
	uint32_t	code_bits;		/* bits of one code in a record: 4 or 8 */
	uint32_t	dsub;			/* dim / m */
	size_t		smem_optin;		/* the device's shared memory per block, opted in */
	float	   *d_books;		/* [m * ksub * dsub], uploaded by set_state */
	gi_cu_buf	s_lut;			/* look-up tables that do not fit shared memory */
	float	   *d_radii;		/* density table of the selective modes, on first use */
};

/* ---- cuda_ivfpq.cu: the kind's entries (kinds[GI_KIND_IVFPQ]) ---- */
extern const gi_kind_ops gi_cu_ivfpq_kind;

/* ---- cuda_ivfpq_scan.cu ---- */

/* the kind's fine scan (a gi_cu_fine_fn; arg is a gi_cu_pq_call, cuda_pq_table.cuh) */
extern gi_status gi_cu_pq_fine(gi_store *s, gi_cu_ivf *iv, uint32_t qc,
							   const uint32_t *probe_lists, uint32_t P, uint32_t k,
							   gi_hit *d_hits, uint32_t *d_found, void *arg);

#endif							/* GI_CUDA_IVFPQ_H */
