/*
 * cuda_ivf.h
 *		The IVF kind of the CUDA backend: what it keeps per store (the
 *		centroids on the device, set once by set_state, and its search
 *		scratch) and the entry points between its files: cuda_ivf.cu (the
 *		kind's entries), cuda_quantizer.cu (probed lists), cuda_search.cu
 *		(fine scan and top-k).
 */
#ifndef GI_CUDA_IVF_H
#define GI_CUDA_IVF_H

#include "cuda_store.h"
#include "gi_kind_ivf.h"

struct gi_cu_ivf
{
	uint32_t	dim;			/* == the store's words */
	gi_metric	metric;

	/* centroids, uploaded by set_state */
	float	   *d_cent;			/* [nlists*dim] */
	double	   *d_centd;		/* [nlists*dim] as doubles, for the DGEMM */
	double	   *d_cnorm;		/* [nlists] |c|^2 summed like the host does */

	/* search scratch (device) */
	gi_cu_buf	s_q;			/* queries (float) */
	gi_cu_buf	s_qd;			/* queries (double) */
	gi_cu_buf	s_qn;			/* |q|^2 float */
	gi_cu_buf	s_qnd;			/* |q|^2 double, host order */
	gi_cu_buf	s_gemm;			/* nlists x qc doubles -> ordered keys */
	gi_cu_buf	s_cand;			/* qc x P' candidate lists */
	gi_cu_buf	s_rkey;			/* qc x P' refined keys */
	gi_cu_buf	s_probe;		/* qc x P probed lists */
	gi_cu_buf	s_hits;			/* qc x k gi_hit */
	gi_cu_buf	s_found;		/* qc */
	gi_cu_buf	s_cd;			/* partial results: distances */
	gi_cu_buf	s_ck;			/* partial results: keys */
	gi_cu_buf	s_cn;			/* partial results: counts */
	gi_cu_buf	s_cnt;			/* general path: candidates per query */
	gi_cu_buf	s_beg;
	gi_cu_buf	s_cur;
	gi_cu_buf	s_gd0;
	gi_cu_buf	s_gk0;
	gi_cu_buf	s_gd1;
	gi_cu_buf	s_gk1;
	gi_cu_buf	s_tmp;			/* CUB temporary storage */
	gi_cu_buf	s_okey;			/* list-ordered units: keys, sorted keys, */
	gi_cu_buf	s_okey2;		/* unit ids, and the order */
	gi_cu_buf	s_oval;
	gi_cu_buf	s_order;
	gi_cu_buf	s_seg;			/* multi-query tiles: first unit of each list, */
	gi_cu_buf	s_tflag;		/* tile-start flags, tile starts and count */
	gi_cu_buf	s_tile;
	/* search scratch (host) */
	gi_cu_hbuf	h_cnt;
	gi_cu_hbuf	h_beg;
	gi_cu_pinned p_q;			/* queries on their way up */
	gi_cu_pinned p_res;			/* hits, found, flags on their way down */
};

/* ---- cuda_ivf.cu: the kind's entries (kinds[GI_KIND_IVF]) ---- */
extern const gi_kind_ops gi_cu_ivf_kind;

/* ---- cuda_quantizer.cu ---- */

/* upload nlists x dim centroids and prepare the quantizer's copies */
extern gi_status gi_cu_ivf_centroids(gi_store *s, gi_cu_ivf *iv, const float *centroids);

/*
 * Prepare the chunk of qc queries already in iv->s_q and choose P lists
 * for each: *probe_lists gets a device array qc x P, or NULL when every
 * list is probed (P == nlists).  Also leaves |q|^2 (float) in iv->s_qn
 * for the fine scan.
 */
extern gi_status gi_cu_coarse(gi_store *s, gi_cu_ivf *iv, uint32_t qc, uint32_t P,
							  const uint32_t **probe_lists);

/* ---- cuda_search.cu ---- */

/*
 * The fine scan of the chunk of qc queries in iv->s_q (norms in iv->s_qn)
 * over their P probed lists (probe_lists, or list p for probe p when
 * NULL): each query's k best records into d_hits / d_found (device).
 * Search kernels raise their error flags in s->d_flags[1].
 */
extern gi_status gi_cu_fine(gi_store *s, gi_cu_ivf *iv, uint32_t qc,
							const uint32_t *probe_lists, uint32_t P, uint32_t k,
							gi_hit *d_hits, uint32_t *d_found);

/* free what gi_cu_ivf holds on the device and the host */
extern void gi_cu_ivf_free(gi_store *s, void *kstate);

#endif							/* GI_CUDA_IVF_H */
