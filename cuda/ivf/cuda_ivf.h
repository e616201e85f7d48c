/*
 * cuda_ivf.h
 *		The IVF kind of the CUDA backend: what it keeps per store (the
 *		centroids on the device, set once by set_state, and its search
 *		scratch) and the entry points between its files: cuda_ivf.cu (the
 *		kind's entries), cuda_quantizer.cu (probed lists), cuda_search.cu
 *		(fine scan and top-k).  The IVF-PQ kind (cuda_ivfpq.h) embeds this
 *		state and uses the quantizer, the query chunks and the top-k.
 */
#ifndef GI_CUDA_IVF_H
#define GI_CUDA_IVF_H

#include "cuda_slabdir.h"
#include "cuda_store.h"
#include "gi_kind_ivf.h"

struct gi_cu_ivf
{
	uint32_t	dim;			/* floats per query (IVF: == the store's words) */
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
	gi_cu_buf	s_hits;			/* qc x k gi_hit, then qc counts */
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

	/* the slab directory of the few-query scan (cuda_search.cu) */
	gi_cu_slabdir dir;

	/* stage times of the next searches (gpuindex.trace_stages) */
	bool		timing;
	cudaEvent_t ev[5];			/* made on first use */
	bool		have_ev;
	uint32_t	nstages;		/* of the last search timed */
	gi_stage_time stages[GI_MAX_STAGES];

	/*
	 * A started search (search_start) whose answer is still on its way
	 * down: where it goes, and the store's lock it holds until then.
	 */
	bool		pend;
	gi_hit	   *pend_hits;
	uint32_t   *pend_found;
	uint32_t	pend_qc;
	uint32_t	pend_k;
};

/*
 * What a scan kernel of the IVF kinds reads and writes (cuda_search.cu,
 * and the IVF-PQ kind's scan).
 */
struct gi_scan_args
{
	const uint32_t *lists;		/* [2*nlists] head, rows */
	const gi_dslab *slabs;
	const float *queries;		/* [nq x D] */
	const float *qnorm;			/* [nq] |q|^2 float */
	const double *qnormd;		/* [nq] |q|^2 double, host order */
	const uint32_t *probes;		/* [nq x P], NULL: list p is probe p */
	uint32_t	P;
	uint32_t	G;				/* groups (blocks) per query */
	uint32_t	W;				/* words per record */
	uint32_t	D;				/* floats per query */
	uint32_t	k;
	uint32_t	cap;
	uint32_t	max_steps;		/* chain walk bound: the pool's size */
	const uint32_t *order;		/* block -> unit, or NULL for the identity */
	/* multi-query tiles (gi_k_scan_tile) */
	const uint32_t *okeys;		/* list of each list-ordered unit */
	const uint32_t *tiles;		/* first ordered unit of each tile */
	const uint32_t *ntiles;		/* tiles (device) */
	uint32_t	nunits;
	int			metric;
	uint32_t   *flags;
	/* top-k outputs: final (G == 1) or partial (G > 1) */
	gi_hit	   *hits;
	uint32_t   *found;
	float	   *cd;
	uint64_t   *ck;
	uint32_t   *cn;
	/* append outputs (large k) */
	uint32_t   *gd;
	uint64_t   *gk;
	unsigned long long *cur;
	const unsigned long long *end;
};

/* ---- cuda_ivf.cu: the kind's entries (kinds[GI_KIND_IVF]) ---- */
extern const gi_kind_ops gi_cu_ivf_kind;

/*
 * The fine scan of a kind: the chunk of qc queries in iv->s_q over their
 * P probed lists (probe_lists, or list p for probe p when NULL), each
 * query's k best records into d_hits / d_found (device).
 */
typedef gi_status (*gi_cu_fine_fn) (gi_store *s, gi_cu_ivf *iv, uint32_t qc,
									const uint32_t *probe_lists, uint32_t P,
									uint32_t k, gi_hit *d_hits, uint32_t *d_found,
									void *arg);

/*
 * A search of the IVF kinds once the kind has checked its state and the
 * query bytes: the common checks (what names the kind in messages), then
 * chunks of queries through the coarse quantizer and fine(arg).  With
 * defer, a search of one chunk that is not timed returns once its work
 * is queued, holding the store's lock, and gi_cu_ivf_finish waits for it
 * (iv->pend); otherwise it returns when done.
 */
extern gi_status gi_cu_ivf_chunks(gi_store *s, gi_cu_ivf *iv, const char *what,
								  uint32_t nq, const float *queries, uint32_t probes,
								  uint32_t k, gi_hit *hits, uint32_t *found,
								  gi_cu_fine_fn fine, void *arg, bool defer);

/* the end of a search gi_cu_ivf_chunks left pending, if any; is it there? */
extern gi_status gi_cu_ivf_finish(gi_store *s, gi_cu_ivf *iv);
extern bool gi_cu_ivf_done(gi_store *s, const gi_cu_ivf *iv);

/*
 * Whether a scan may take the slab directory iv->dir, brought up to date
 * (a rebuild after a write costs less than walking the longest probed
 * chain).  Where searches may overlap mutations (the store's concurrent
 * mode) the chain walk: a mutation could change the slab headers between
 * the rebuild's passes.
 * Test hook gi_cuda_ivf_set_scan forces either way.
 */
extern bool gi_cu_ivf_dir_ready(gi_store *s, gi_cu_ivf *iv);

/* free what the members of iv hold (not iv itself); the caller synchronised */
extern void gi_cu_ivf_release(gi_cu_ivf *iv);

/* the IVF kinds' time_stages and last_stages (their state embeds iv) */
extern void gi_cu_ivf_time_stages(gi_cu_ivf *iv, bool on);
extern uint32_t gi_cu_ivf_last_stages(const gi_cu_ivf *iv, gi_stage_time *out, uint32_t max);

/* ---- cuda_quantizer.cu ---- */

/* upload nlists x dim centroids and prepare the quantizer's copies */
extern gi_status gi_cu_ivf_centroids(gi_store *s, gi_cu_ivf *iv, const float *centroids);

/*
 * Prepare the chunk of qc queries (iv->dim floats each) already in
 * iv->s_q and choose P lists for each: *probe_lists gets a device array
 * qc x P, or NULL when every list is probed (P == nlists).  Also leaves
 * |q|^2 in iv->s_qn (float) and iv->s_qnd (double, the host's sum) for
 * the fine scan.
 */
extern gi_status gi_cu_coarse(gi_store *s, gi_cu_ivf *iv, uint32_t qc, uint32_t P,
							  const uint32_t **probe_lists);

/* ---- cuda_search.cu ---- */

/*
 * The IVF kind's fine scan (a gi_cu_fine_fn; arg unused).  Search kernels
 * raise their error flags in s->d_flags[1].
 */
extern gi_status gi_cu_fine(gi_store *s, gi_cu_ivf *iv, uint32_t qc,
							const uint32_t *probe_lists, uint32_t P, uint32_t k,
							gi_hit *d_hits, uint32_t *d_found, void *arg);

/* blocks per query: enough units to fill the GPU when queries are few */
extern uint32_t gi_cu_groups(const gi_store *s, uint32_t qc, uint32_t P);

/* scratch for `units` partial top-k lists of a->k entries (a->cd, ck, cn) */
extern gi_status gi_cu_partials(gi_cu_ivf *iv, gi_scan_args *a, size_t units);

/* each query's a.G partial lists (a.cd, ck, cn) into its final top-k */
extern gi_status gi_cu_merge(gi_store *s, const gi_scan_args &a, uint32_t qc,
							 gi_hit *d_hits, uint32_t *d_found);

/*
 * Large k: a kind's scan appends every live candidate of queries [0, nsub)
 * of b (b.G blocks per query, b.cap 0) to b.gd / b.gk at b.cur, bounded
 * by b.end (gi_append).
 */
typedef gi_status (*gi_cu_append_fn) (gi_store *s, const gi_scan_args &b,
									  uint32_t nsub, void *arg);

/*
 * k above GI_CU_FAST_K: candidates counted from the list row counts,
 * appended by append(arg) in sub-chunks under a budget, sorted by
 * (distance, key) with CUB, the first k kept.
 */
extern gi_status gi_cu_general(gi_store *s, gi_cu_ivf *iv, gi_scan_args a, uint32_t qc,
							   gi_hit *d_hits, uint32_t *d_found,
							   gi_cu_append_fn append, void *arg);

/* free what gi_cu_ivf holds on the device and the host */
extern void gi_cu_ivf_free(gi_store *s, void *kstate);

#endif							/* GI_CUDA_IVF_H */
