/*
 * host_ivf.c
 *		IVF search over the host slab store: the reference the CUDA kernels
 *		are compared against.
 *
 * Numerics (the tests' brute force follows the same rules, and the CUDA
 * backend is compared with a tolerance):
 *	- every distance is accumulated in double, dimension 0 first, from the
 *	  float inputs, then rounded once to float;
 *	- L2: sum (x - q)^2;  IP: -sum x * q;
 *	  cosine: 1 - dot / (sqrt(|q|^2) * sqrt(|x|^2)), +Inf when either norm
 *	  is zero;
 *	- a NaN distance (NaN or Inf in the data) ranks as +Inf, so it sorts
 *	  last and never breaks the ordering;
 *	- records are ranked by (float distance, key) ascending, so the order
 *	  agrees with the distances reported; probed lists are chosen by
 *	  (double centroid distance, list number).
 *
 * The queries of a call are shared out between the host backend's threads
 * (host_pool.h); when there are fewer queries than threads, each query's
 * probed lists are split into parts scanned apart and merged.  Either way
 * every answer is the one a single thread computes, byte for byte.
 *
 * The probing, threading and top-k are shared with the kinds whose lists
 * are IVF cells but whose records are not vectors (IVF-PQ): such a kind
 * passes a gi_host_list_scorer that scores one probed list's records.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_pool.h"
#include "host_store.h"
#include "host_topk.h"

/* turn the accumulated sums into the metric's distance */
static inline double
gi_host_finish(gi_metric metric, double acc, double norm2, double qnorm2)
{
	switch (metric)
	{
		case GI_METRIC_L2:
			return acc;
		case GI_METRIC_IP:
			return -acc;
		case GI_METRIC_COSINE:
			if (qnorm2 == 0.0 || norm2 == 0.0)
				return INFINITY;
			return 1.0 - acc / (sqrt(qnorm2) * sqrt(norm2));
	}
	return INFINITY;
}

/* NaN ranks last */
static inline float
gi_host_rank_value(double d)
{
	float		f = (float) d;

	return isnan(f) ? INFINITY : f;
}

static double
gi_host_norm2(const float *v, uint32_t dim)
{
	double		s = 0.0;
	uint32_t	j;

	for (j = 0; j < dim; j++)
		s += (double) v[j] * v[j];
	return s;
}

/* distance between the query and a contiguous vector (a centroid) */
static double
gi_host_vec_distance(gi_metric metric, uint32_t dim, const float *q,
					 double qnorm2, const float *x)
{
	double		acc = 0.0;
	uint32_t	j;

	if (metric == GI_METRIC_L2)
	{
		for (j = 0; j < dim; j++)
		{
			double		d = (double) x[j] - q[j];

			acc += d * d;
		}
		return acc;
	}
	for (j = 0; j < dim; j++)
		acc += (double) x[j] * q[j];
	return gi_host_finish(metric, acc,
						  metric == GI_METRIC_COSINE ? gi_host_norm2(x, dim) : 0.0,
						  qnorm2);
}

/*
 * The sums of all 32 slots of a slab at once.  The interleaved layout makes
 * word j of every slot one contiguous run of 32 floats, so the inner loop
 * runs across slots, four doubles a vector; each slot still sums its
 * dimensions in order 0..dim-1 with one multiply and one add a term,
 * exactly like gi_host_vec_distance, so every instruction set gives the
 * same bits (no fused multiply-add: the clone enables AVX2 only).  With
 * GCC on x86-64 an AVX2 clone is built beside the baseline one, and the
 * loader picks the one the CPU runs.
 */
typedef double gi_v4d __attribute__((vector_size(32)));
typedef float gi_v4f __attribute__((vector_size(16)));

_Static_assert(GI_SLAB_RECORDS % 16 == 0, "a slab's slots in passes of 16");

/* slots w[i] .. w[i + 3] as doubles into x (a macro: no vector-typed calls) */
#define GI_HOST_V4D(x, w, i) \
	do { \
		gi_v4f		xf_; \
		memcpy(&xf_, (w) + (i), sizeof(xf_)); \
		(x) = __builtin_convertvector(xf_, gi_v4d); \
	} while (0)

/*
 * Half a slab's slots (16 from `first`) a pass, so that the sums stay in
 * registers: four vectors of four, and four of the norms.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void
gi_host_slab_sums(bool l2, uint32_t dim, const float *q, const uint32_t *payload,
				  double acc_out[GI_SLAB_RECORDS], double nrm_out[GI_SLAB_RECORDS])
{
	for (uint32_t first = 0; first < GI_SLAB_RECORDS; first += 16)
	{
		gi_v4d		a0 = {0},
					a1 = {0},
					a2 = {0},
					a3 = {0};
		gi_v4d		n0 = {0},
					n1 = {0},
					n2 = {0},
					n3 = {0};
		const uint32_t *w = payload + first;

		for (uint32_t j = 0; j < dim; j++, w += GI_SLAB_RECORDS)
		{
			double		qd = q[j];
			gi_v4d		qj = {qd, qd, qd, qd};
			gi_v4d		x0,
						x1,
						x2,
						x3;

			/* memcpy inside: the store holds words, not floats */
			GI_HOST_V4D(x0, w, 0);
			GI_HOST_V4D(x1, w, 4);
			GI_HOST_V4D(x2, w, 8);
			GI_HOST_V4D(x3, w, 12);

			if (l2)
			{
				x0 -= qj;
				x1 -= qj;
				x2 -= qj;
				x3 -= qj;
				a0 += x0 * x0;
				a1 += x1 * x1;
				a2 += x2 * x2;
				a3 += x3 * x3;
			}
			else
			{
				a0 += x0 * qj;
				a1 += x1 * qj;
				a2 += x2 * qj;
				a3 += x3 * qj;
				n0 += x0 * x0;
				n1 += x1 * x1;
				n2 += x2 * x2;
				n3 += x3 * x3;
			}
		}
		memcpy(acc_out + first, &a0, sizeof(a0));
		memcpy(acc_out + first + 4, &a1, sizeof(a1));
		memcpy(acc_out + first + 8, &a2, sizeof(a2));
		memcpy(acc_out + first + 12, &a3, sizeof(a3));
		memcpy(nrm_out + first, &n0, sizeof(n0));
		memcpy(nrm_out + first + 4, &n1, sizeof(n1));
		memcpy(nrm_out + first + 8, &n2, sizeof(n2));
		memcpy(nrm_out + first + 12, &n3, sizeof(n3));
	}
}

/*
 * Distances of all 32 slots of a slab; slots without a valid bit get
 * meaningless (but defined: the pool is zeroed) values the caller ignores.
 */
static void
gi_host_slab_distances(gi_metric metric, uint32_t dim, const float *q,
					   double qnorm2, const uint32_t *payload,
					   double out[GI_SLAB_RECORDS])
{
	double		acc[GI_SLAB_RECORDS];
	double		nrm[GI_SLAB_RECORDS];
	uint32_t	i;

	gi_host_slab_sums(metric == GI_METRIC_L2, dim, q, payload, acc, nrm);
	for (i = 0; i < GI_SLAB_RECORDS; i++)
		out[i] = gi_host_finish(metric, acc[i], nrm[i], qnorm2);
}

/* one slot of a slab: for sparsely filled slabs, same sums as above */
static double
gi_host_slot_distance(gi_metric metric, uint32_t dim, const float *q,
					  double qnorm2, const uint32_t *payload, uint32_t slot)
{
	double		acc = 0.0;
	double		nrm = 0.0;
	uint32_t	j;

	for (j = 0; j < dim; j++)
	{
		float		x;
		double		qj = q[j];

		memcpy(&x, payload + (size_t) j * GI_SLAB_RECORDS + slot, sizeof(x));
		if (metric == GI_METRIC_L2)
		{
			double		d = (double) x - qj;

			acc += d * d;
		}
		else
		{
			acc += (double) x * qj;
			nrm += (double) x * x;
		}
	}
	return gi_host_finish(metric, acc, nrm, qnorm2);
}

/* below this many live slots, computing only those beats a full slab pass */
#define GI_HOST_SPARSE_SLAB 8

/* queries a task scans list by list at least, and the scratch of a task's */
#define GI_HOST_TILE_QUERIES	8
#define GI_HOST_TILE_SCRATCH	((size_t) 16 << 20)

/* a query's probed lists are split between threads only for k up to this */
#define GI_HOST_SPLIT_MAX_CAP	1024

/* what the tasks of one search share */
typedef struct gi_host_ivf_job
{
	gi_store   *store;
	const uint32_t *blocks;		/* the centroids in slab layout (gi_host_centroid_blocks) */
	uint32_t	nlists;
	uint32_t	dim;
	gi_metric	metric;
	const float *queries;
	uint32_t	probes;
	uint32_t	k;
	uint32_t	cap;			/* candidates kept per query: min(k, rows) */
	gi_hit	   *hits;
	uint32_t   *found;
	uint32_t	nq;

	/* NULL: records are float vectors; else the kind scores a list */
	const gi_host_list_scorer *scorer;
	float	   *scratch;		/* scorer->scratch_floats per worker */

	/* whole queries a task: per worker a heap of cap and one of probes */
	uint32_t	qchunk;
	gi_host_cand *wbest;
	gi_host_cand *wlists;

	/*
	 * Tiles (float vectors, several queries a task): per worker a heap of
	 * cap for each of the task's queries (in wbest), their probed lists (in
	 * wlists), (list, query) pairs and the queries' norms.
	 */
	bool		tiles;
	uint64_t   *tpairs;
	double	   *tnorm;
	uint32_t   *theapn;

	/*
	 * Few queries: each query's lists (qlists, probes a query) are split
	 * into parts scanned by separate tasks, each into its own heap (pbest,
	 * cap a part), merged afterwards.
	 */
	uint32_t	parts;
	gi_host_cand *qlists;
	uint32_t   *nqlists;
	gi_host_cand *pbest;
	uint32_t   *npbest;
} gi_host_ivf_job;

static inline const float *
gi_host_ivf_query(const gi_host_ivf_job *job, uint32_t q, double *qnorm2)
{
	const float *qv = job->queries + (size_t) q * job->dim;

	*qnorm2 = job->metric == GI_METRIC_COSINE ? gi_host_norm2(qv, job->dim) : 0.0;
	return qv;
}

/*
 * The probes lists with the nearest centroids into lists (cap probes): 32
 * centroids at a time from their slab-layout copy, each centroid's sum in
 * the order and precision of gi_host_vec_distance (so the same bits), the
 * 32 sums independent of each other instead of one chain per centroid.
 */
static void
gi_host_ivf_rank_lists(const gi_host_ivf_job *job, const float *qv, double qnorm2,
					   gi_host_topk *lists)
{
	uint32_t	first;

	lists->n = 0;
	for (first = 0; first < job->nlists; first += GI_SLAB_RECORDS)
	{
		double		d[GI_SLAB_RECORDS];
		uint32_t	n = job->nlists - first < GI_SLAB_RECORDS ?
			job->nlists - first : GI_SLAB_RECORDS;
		uint32_t	i;

		gi_host_slab_distances(job->metric, job->dim, qv, qnorm2,
							   job->blocks + (size_t) first * job->dim, d);
		for (i = 0; i < n; i++)
			gi_host_topk_push(lists, isnan(d[i]) ? INFINITY : d[i], first + i);
	}
}

/* every live record of one slab (float vectors) into best */
static void
gi_host_ivf_scan_slab(const gi_host_ivf_job *job, const float *qv, double qnorm2,
					  const gi_host_slab_view *view, gi_host_topk *best)
{
	uint32_t	bits = view->bitmap;

	if (view->count < GI_HOST_SPARSE_SLAB)
	{
		while (bits)
		{
			uint32_t	slot = (uint32_t) __builtin_ctz(bits);
			double		d = gi_host_slot_distance(job->metric, job->dim, qv, qnorm2,
												  view->payload, slot);

			bits &= bits - 1;
			gi_host_topk_push(best, gi_host_rank_value(d), view->keys[slot]);
		}
	}
	else
	{
		double		d[GI_SLAB_RECORDS];

		gi_host_slab_distances(job->metric, job->dim, qv, qnorm2, view->payload, d);
		while (bits)
		{
			uint32_t	slot = (uint32_t) __builtin_ctz(bits);

			bits &= bits - 1;
			gi_host_topk_push(best, gi_host_rank_value(d[slot]), view->keys[slot]);
		}
	}
}

/* every live record of one list (float vectors) into best */
static void
gi_host_ivf_scan_vectors(const gi_host_ivf_job *job, const float *qv, double qnorm2,
						 uint32_t list, gi_host_topk *best)
{
	uint32_t	slab = gi_host_store_list_head(job->store, list);
	gi_host_slab_view view;

	while (slab != GI_NIL && gi_host_store_slab(job->store, slab, &view))
	{
		gi_host_ivf_scan_slab(job, qv, qnorm2, &view, best);
		slab = view.next;
	}
}

/* every live record of one list into best, scored by the kind */
static void
gi_host_ivf_scan_list(const gi_host_ivf_job *job, const float *qv, double qnorm2,
					  uint32_t list, uint32_t worker, gi_host_topk *best)
{
	if (job->scorer == NULL)
		gi_host_ivf_scan_vectors(job, qv, qnorm2, list, best);
	else
		job->scorer->scan(job->scorer->arg, job->store, qv, qnorm2, list,
						  job->scratch + (size_t) worker * job->scorer->scratch_floats,
						  best);
}

/* query q's answer from its heap of candidates */
static void
gi_host_ivf_emit(const gi_host_ivf_job *job, uint32_t q, gi_host_topk *best)
{
	gi_hit	   *out = job->hits + (size_t) q * job->k;
	uint32_t	r;

	gi_host_topk_sort(best);
	for (r = 0; r < best->n; r++)
	{
		out[r].key = best->v[r].id;
		out[r].distance = (float) best->v[r].dist;
		out[r].pad = 0;
	}
	for (; r < job->k; r++)
	{
		out[r].key = 0;
		out[r].distance = INFINITY;
		out[r].pad = 0;
	}
	job->found[q] = best->n;
}

/* task: queries [task * qchunk, ...) whole */
static gi_status
gi_host_ivf_query_task(void *arg, uint32_t task, uint32_t worker)
{
	const gi_host_ivf_job *job = arg;
	uint32_t	first = task * job->qchunk;
	uint32_t	end = job->nq - first < job->qchunk ? job->nq : first + job->qchunk;
	gi_host_topk best;
	gi_host_topk lists;
	uint32_t	q;

	best.v = job->wbest + (size_t) worker * (job->cap > 0 ? job->cap : 1);
	best.cap = job->cap;
	lists.v = job->wlists + (size_t) worker * job->probes;
	lists.cap = job->probes;
	for (q = first; q < end; q++)
	{
		double		qnorm2;
		const float *qv = gi_host_ivf_query(job, q, &qnorm2);
		uint32_t	p;

		gi_host_ivf_rank_lists(job, qv, qnorm2, &lists);
		best.n = 0;
		for (p = 0; p < lists.n; p++)
			gi_host_ivf_scan_list(job, qv, qnorm2, (uint32_t) lists.v[p].id, worker, &best);
		gi_host_ivf_emit(job, q, &best);
	}
	return GI_OK;
}

static int
gi_host_pair_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/*
 * task: queries [task * qchunk, ...) list by list.  Each query's lists are
 * ranked, the (list, query) pairs sorted, and each list's slabs read once
 * for all the task's queries that probe it, the slab still in cache for
 * the next query.  Each query's heap gets the same records as in the
 * query-by-query scan, so the same answer.
 */
static gi_status
gi_host_ivf_tile_task(void *arg, uint32_t task, uint32_t worker)
{
	const gi_host_ivf_job *job = arg;
	uint32_t	first = task * job->qchunk;
	uint32_t	nt = job->nq - first < job->qchunk ? job->nq - first : job->qchunk;
	size_t		cap1 = job->cap > 0 ? job->cap : 1;
	gi_host_cand *wbest = job->wbest + (size_t) worker * job->qchunk * cap1;
	gi_host_cand *wlists = job->wlists + (size_t) worker * job->qchunk * job->probes;
	uint64_t   *pairs = job->tpairs + (size_t) worker * job->qchunk * job->probes;
	double	   *norm = job->tnorm + (size_t) worker * job->qchunk;
	uint32_t   *heapn = job->theapn + (size_t) worker * job->qchunk;
	size_t		npairs = 0;
	size_t		i;
	uint32_t	t;

	for (t = 0; t < nt; t++)
	{
		const float *qv = gi_host_ivf_query(job, first + t, &norm[t]);
		gi_host_topk lists;
		uint32_t	p;

		lists.v = wlists + (size_t) t * job->probes;
		lists.cap = job->probes;
		gi_host_ivf_rank_lists(job, qv, norm[t], &lists);
		for (p = 0; p < lists.n; p++)
			pairs[npairs++] = (lists.v[p].id << 32) | t;
		heapn[t] = 0;
	}
	qsort(pairs, npairs, sizeof(uint64_t), gi_host_pair_cmp);

	for (i = 0; i < npairs;)
	{
		uint32_t	list = (uint32_t) (pairs[i] >> 32);
		size_t		end = i;
		uint32_t	slab = gi_host_store_list_head(job->store, list);
		gi_host_slab_view view;

		while (end < npairs && (uint32_t) (pairs[end] >> 32) == list)
			end++;
		while (slab != GI_NIL && gi_host_store_slab(job->store, slab, &view))
		{
			size_t		j;

			for (j = i; j < end; j++)
			{
				uint32_t	qt = (uint32_t) pairs[j];
				gi_host_topk best;

				best.v = wbest + (size_t) qt * cap1;
				best.cap = job->cap;
				best.n = heapn[qt];
				gi_host_ivf_scan_slab(job, job->queries + (size_t) (first + qt) * job->dim,
									  norm[qt], &view, &best);
				heapn[qt] = best.n;
			}
			slab = view.next;
		}
		i = end;
	}

	for (t = 0; t < nt; t++)
	{
		gi_host_topk best;

		best.v = wbest + (size_t) t * cap1;
		best.cap = job->cap;
		best.n = heapn[t];
		gi_host_ivf_emit(job, first + t, &best);
	}
	return GI_OK;
}

/* task: the lists query `task` probes */
static gi_status
gi_host_ivf_rank_task(void *arg, uint32_t task, uint32_t worker)
{
	gi_host_ivf_job *job = arg;
	double		qnorm2;
	const float *qv = gi_host_ivf_query(job, task, &qnorm2);
	gi_host_topk lists;

	(void) worker;
	lists.v = job->qlists + (size_t) task * job->probes;
	lists.cap = job->probes;
	gi_host_ivf_rank_lists(job, qv, qnorm2, &lists);
	job->nqlists[task] = lists.n;
	return GI_OK;
}

/* task: one part of one query's lists (every parts-th, from the part's number) */
static gi_status
gi_host_ivf_part_task(void *arg, uint32_t task, uint32_t worker)
{
	gi_host_ivf_job *job = arg;
	uint32_t	q = task / job->parts;
	double		qnorm2;
	const float *qv = gi_host_ivf_query(job, q, &qnorm2);
	const gi_host_cand *lists = job->qlists + (size_t) q * job->probes;
	gi_host_topk best;
	uint32_t	p;

	best.v = job->pbest + (size_t) task * job->cap;
	best.cap = job->cap;
	best.n = 0;
	for (p = task % job->parts; p < job->nqlists[q]; p += job->parts)
		gi_host_ivf_scan_list(job, qv, qnorm2, (uint32_t) lists[p].id, worker, &best);
	job->npbest[task] = best.n;
	return GI_OK;
}

/*
 * Each query's lists split into job->parts parts: rank, scan the parts,
 * then merge.  The k best of the parts' k best are the k best of all
 * records under the (distance, key) order, so the answer is the one a
 * single scan gives.
 */
static gi_status
gi_host_ivf_search_parts(gi_host_ivf_job *job, uint32_t workers)
{
	gi_status	st;
	uint32_t	q;

	st = gi_host_pool_run(job->nq, workers, gi_host_ivf_rank_task, job);
	if (st == GI_OK)
		st = gi_host_pool_run(job->nq * job->parts, workers, gi_host_ivf_part_task, job);
	if (st != GI_OK)
		return st;
	for (q = 0; q < job->nq; q++)
	{
		gi_host_topk best;
		uint32_t	p;

		best.v = job->wbest;
		best.cap = job->cap;
		best.n = 0;
		for (p = 0; p < job->parts; p++)
		{
			const gi_host_cand *c = job->pbest + ((size_t) q * job->parts + p) * job->cap;
			uint32_t	i;

			for (i = 0; i < job->npbest[(size_t) q * job->parts + p]; i++)
				gi_host_topk_push(&best, c[i].dist, c[i].id);
		}
		gi_host_ivf_emit(job, q, &best);
	}
	return GI_OK;
}

uint32_t *
gi_host_centroid_blocks(const float *centroids, uint32_t nlists, uint32_t dim)
{
	size_t		nblocks = ((size_t) nlists + GI_SLAB_RECORDS - 1) / GI_SLAB_RECORDS;
	uint32_t   *blocks = calloc(nblocks * GI_SLAB_RECORDS * dim, sizeof(uint32_t));
	uint32_t	l;

	if (blocks == NULL)
	{
		gi_host_set_error("ivf_search: out of memory for %zu centroid blocks of %u dimensions",
						  nblocks, dim);
		return NULL;
	}
	for (l = 0; l < nlists; l++)
	{
		uint32_t   *block = blocks + (size_t) (l / GI_SLAB_RECORDS) * GI_SLAB_RECORDS * dim;
		uint32_t	j;

		for (j = 0; j < dim; j++)
			memcpy(&block[(size_t) j * GI_SLAB_RECORDS + l % GI_SLAB_RECORDS],
				   &centroids[(size_t) l * dim + j], sizeof(uint32_t));
	}
	return blocks;
}

gi_status
gi_host_ivf_search(gi_store *store, const float *centroids, uint32_t dim,
				   gi_metric metric, uint32_t nq, const float *queries,
				   uint32_t probes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	return gi_host_ivf_search_lists(store, centroids, NULL, dim, metric, nq, queries,
									probes, k, hits, found, NULL);
}

gi_status
gi_host_ivf_search_lists(gi_store *store, const float *centroids,
						 const uint32_t *blocks, uint32_t dim,
						 gi_metric metric, uint32_t nq, const float *queries,
						 uint32_t probes, uint32_t k, gi_hit *hits, uint32_t *found,
						 const gi_host_list_scorer *scorer)
{
	uint32_t   *own_blocks = NULL;
	const gi_store_params *params;
	gi_store_stats stats;
	gi_host_ivf_job job;
	uint32_t	workers;
	uint64_t	work;
	size_t		cap1;
	size_t		per_worker;
	gi_status	st;
	uint32_t	q;

	if (store == NULL)
	{
		gi_host_set_error("ivf_search: no store");
		return GI_ERR_INVALID;
	}
	params = gi_host_store_params(store);
	if (dim == 0 || (scorer == NULL && (uint64_t) dim * 4 != params->record_bytes))
	{
		gi_host_set_error("ivf_search: dimension %u does not match records of %u bytes",
						  dim, params->record_bytes);
		return GI_ERR_INVALID;
	}
	if (metric != GI_METRIC_L2 && metric != GI_METRIC_IP &&
		metric != GI_METRIC_COSINE)
	{
		gi_host_set_error("ivf_search: unknown metric %d", (int) metric);
		return GI_ERR_INVALID;
	}
	if (probes == 0)
	{
		gi_host_set_error("ivf_search: probes must be at least 1");
		return GI_ERR_INVALID;
	}
	if (nq == 0)
		return GI_OK;
	if (centroids == NULL || queries == NULL || found == NULL ||
		(k > 0 && hits == NULL))
	{
		gi_host_set_error("ivf_search: centroids, queries, hits and found must not be NULL");
		return GI_ERR_INVALID;
	}
	if (k == 0)
	{
		for (q = 0; q < nq; q++)
			found[q] = 0;
		return GI_OK;
	}
	if (probes > params->nlists)
		probes = params->nlists;

	if (blocks == NULL)
	{
		own_blocks = gi_host_centroid_blocks(centroids, params->nlists, dim);
		if (own_blocks == NULL)
			return GI_ERR_NOMEM;
		blocks = own_blocks;
	}

	memset(&job, 0, sizeof(job));
	job.store = store;
	job.blocks = blocks;
	job.nlists = params->nlists;
	job.dim = dim;
	job.metric = metric;
	job.queries = queries;
	job.probes = probes;
	job.k = k;
	job.hits = hits;
	job.found = found;
	job.nq = nq;
	job.scorer = scorer;

	/* never more candidates than records: k may be huge */
	gi_host_backend()->store_stats(store, &stats);
	job.cap = stats.rows < k ? (uint32_t) stats.rows : k;
	cap1 = job.cap > 0 ? job.cap : 1;

	/* threads: for enough work, and as many as their scratch allows */
	work = ((uint64_t) params->nlists + stats.rows * probes / params->nlists) * dim;
	workers = gi_host_pool_worth(work * nq) ? gi_host_pool_threads() : 1;
	per_worker = (cap1 + probes) * sizeof(gi_host_cand) +
		(scorer != NULL ? scorer->scratch_floats * sizeof(float) : 0);
	if (workers > 1 && GI_HOST_POOL_SCRATCH / per_worker + 1 < workers)
		workers = (uint32_t) (GI_HOST_POOL_SCRATCH / per_worker + 1);

	if (scorer != NULL && scorer->scratch_floats > 0)
	{
		/* zeroed: a scorer may keep state there from list to list */
		job.scratch = calloc(scorer->scratch_floats * workers, sizeof(float));
		if (job.scratch == NULL)
		{
			gi_host_set_error("ivf_search: out of memory for %zu floats of scratch",
							  scorer->scratch_floats * workers);
			free(own_blocks);
			return GI_ERR_NOMEM;
		}
	}

	if (workers > 1 && nq < workers && probes > 1 && job.cap <= GI_HOST_SPLIT_MAX_CAP)
	{
		uint32_t	parts = (4 * workers + nq - 1) / nq;

		job.parts = parts < probes ? parts : probes;
		job.wbest = malloc(sizeof(gi_host_cand) * cap1);
		job.qlists = malloc(sizeof(gi_host_cand) * nq * probes);
		job.nqlists = malloc(sizeof(uint32_t) * nq);
		job.pbest = malloc(sizeof(gi_host_cand) * cap1 * nq * job.parts);
		job.npbest = malloc(sizeof(uint32_t) * nq * job.parts);
		if (job.wbest == NULL || job.qlists == NULL || job.nqlists == NULL ||
			job.pbest == NULL || job.npbest == NULL)
		{
			gi_host_set_error("ivf_search: out of memory for %u candidates", job.cap);
			st = GI_ERR_NOMEM;
		}
		else
			st = gi_host_ivf_search_parts(&job, workers);
	}
	else
	{
		/*
		 * Whole queries a task, a few tasks a worker so that they even out;
		 * for float vectors at least a few queries a task (when there are
		 * as many), scanned list by list, as many as the scratch holds.
		 */
		size_t		per_query = (cap1 + probes) * sizeof(gi_host_cand) +
			probes * sizeof(uint64_t) + sizeof(double) + sizeof(uint32_t);
		size_t		qmax = GI_HOST_TILE_SCRATCH / per_query;
		uint32_t	least = (nq + workers - 1) / workers;

		job.qchunk = workers > 1 ? nq / (4 * workers) : nq;
		if (scorer == NULL && job.qchunk < GI_HOST_TILE_QUERIES)
			job.qchunk = least < GI_HOST_TILE_QUERIES ? least : GI_HOST_TILE_QUERIES;
		job.tiles = scorer == NULL && nq > 1;
		if (job.tiles && job.qchunk > qmax)
			job.qchunk = (uint32_t) (qmax > 0 ? qmax : 1);
		if (job.qchunk == 0)
			job.qchunk = 1;
		if (job.qchunk == 1)
			job.tiles = false;
		job.wbest = malloc(sizeof(gi_host_cand) * cap1 * workers *
						   (job.tiles ? job.qchunk : 1));
		job.wlists = malloc(sizeof(gi_host_cand) * probes * workers *
							(job.tiles ? job.qchunk : 1));
		if (job.tiles)
		{
			job.tpairs = malloc(sizeof(uint64_t) * probes * workers * job.qchunk);
			job.tnorm = malloc(sizeof(double) * workers * job.qchunk);
			job.theapn = malloc(sizeof(uint32_t) * workers * job.qchunk);
		}
		if (job.wbest == NULL || job.wlists == NULL ||
			(job.tiles && (job.tpairs == NULL || job.tnorm == NULL || job.theapn == NULL)))
		{
			gi_host_set_error("ivf_search: out of memory for %u candidates", job.cap);
			st = GI_ERR_NOMEM;
		}
		else
			st = gi_host_pool_run((nq + job.qchunk - 1) / job.qchunk, workers,
								  job.tiles ? gi_host_ivf_tile_task : gi_host_ivf_query_task,
								  &job);
	}
	free(job.tpairs);
	free(job.tnorm);
	free(job.theapn);
	free(job.wbest);
	free(job.wlists);
	free(job.qlists);
	free(job.nqlists);
	free(job.pbest);
	free(job.npbest);
	free(job.scratch);
	free(own_blocks);
	return st;
}

/* what the tasks of one kmeans_assign share */
typedef struct gi_host_assign_job
{
	uint32_t	nlists;
	uint32_t	dim;
	gi_metric	metric;
	const float *centroids;
	uint32_t	n;
	const float *vectors;
	uint32_t   *lists;
} gi_host_assign_job;

#define GI_HOST_ASSIGN_CHUNK 256

/* task: the nearest list of vectors [task * GI_HOST_ASSIGN_CHUNK, ...) */
static gi_status
gi_host_assign_task(void *arg, uint32_t task, uint32_t worker)
{
	const gi_host_assign_job *job = arg;
	uint32_t	i = task * GI_HOST_ASSIGN_CHUNK;
	uint32_t	end = job->n - i < GI_HOST_ASSIGN_CHUNK ? job->n : i + GI_HOST_ASSIGN_CHUNK;

	(void) worker;
	for (; i < end; i++)
	{
		const float *x = job->vectors + (size_t) i * job->dim;
		double		xnorm2 = job->metric == GI_METRIC_COSINE ? gi_host_norm2(x, job->dim) : 0.0;
		double		best = INFINITY;
		uint32_t	bestl = 0;
		uint32_t	l;

		for (l = 0; l < job->nlists; l++)
		{
			double		d = gi_host_vec_distance(job->metric, job->dim, x, xnorm2,
												 job->centroids + (size_t) l * job->dim);

			if (isnan(d))
				d = INFINITY;
			if (d < best)
			{
				best = d;
				bestl = l;
			}
		}
		job->lists[i] = bestl;
	}
	return GI_OK;
}

/*
 * The nearest list of each vector, ranked exactly as the search above
 * ranks the lists to probe: (double centroid distance, list number), NaN
 * as +Inf.  The reference of the kmeans_assign entry (gi_backend.h); the
 * host backend itself leaves that entry empty (the access method assigns
 * in the building backend).
 */
gi_status
gi_host_kmeans_assign(gi_device *device, uint32_t nlists, uint32_t dim,
					  gi_metric metric, const float *centroids, uint32_t n,
					  const float *vectors, uint32_t *lists)
{
	gi_host_assign_job job;
	uint32_t	workers;

	(void) device;
	if (nlists == 0 || dim == 0 || (n > 0 && (centroids == NULL || vectors == NULL ||
											  lists == NULL)) ||
		(metric != GI_METRIC_L2 && metric != GI_METRIC_IP && metric != GI_METRIC_COSINE))
	{
		gi_host_set_error("kmeans_assign: invalid arguments");
		return GI_ERR_INVALID;
	}
	job.nlists = nlists;
	job.dim = dim;
	job.metric = metric;
	job.centroids = centroids;
	job.n = n;
	job.vectors = vectors;
	job.lists = lists;
	workers = gi_host_pool_worth((uint64_t) n * nlists * dim) ? gi_host_pool_threads() : 1;
	return gi_host_pool_run((uint32_t) (((uint64_t) n + GI_HOST_ASSIGN_CHUNK - 1) /
										GI_HOST_ASSIGN_CHUNK),
							workers, gi_host_assign_task, &job);
}

/* ---- the IVF kind: state kept with the store, search with it ------------ */

/* what the IVF kind keeps with a store: the set_state bytes and the centroid blocks */
typedef struct gi_host_ivf_kstate
{
	gi_ivf_state *st;
	uint32_t   *blocks;
} gi_host_ivf_kstate;

static void
gi_host_ivf_kstate_free(void *arg)
{
	gi_host_ivf_kstate *ks = arg;

	if (ks == NULL)
		return;
	free(ks->st);
	free(ks->blocks);
	free(ks);
}

static gi_status
gi_host_ivf_set_state(gi_store *store, const void *state, size_t bytes)
{
	const gi_store_params *params;
	const gi_ivf_state *st = state;
	gi_host_ivf_kstate *ks;
	size_t		bad;

	if (store == NULL || state == NULL || bytes < sizeof(gi_ivf_state))
	{
		gi_host_set_error("ivf set_state: no store or no state");
		return GI_ERR_INVALID;
	}
	params = gi_host_store_params(store);
	if (st->nlists != params->nlists || st->dim == 0 ||
		(uint64_t) st->dim * 4 != params->record_bytes ||
		bytes != gi_ivf_state_size(st->nlists, st->dim))
	{
		gi_host_set_error("ivf set_state: state of %u lists x %u dimensions (%zu bytes) does not fit a store of %u lists and %u-byte records",
						  st->nlists, st->dim, bytes, params->nlists,
						  params->record_bytes);
		return GI_ERR_INVALID;
	}
	if (st->metric != GI_METRIC_L2 && st->metric != GI_METRIC_IP &&
		st->metric != GI_METRIC_COSINE)
	{
		gi_host_set_error("ivf set_state: unknown metric %u", st->metric);
		return GI_ERR_INVALID;
	}
	bad = gi_first_nonfinite(gi_ivf_state_centroids(st), (size_t) st->nlists * st->dim);
	if (bad < (size_t) st->nlists * st->dim)
	{
		gi_host_set_error("ivf set_state: centroid value %zu is NaN or infinite", bad);
		return GI_ERR_INVALID;
	}
	ks = calloc(1, sizeof(gi_host_ivf_kstate));
	if (ks != NULL)
		ks->st = malloc(bytes);
	if (ks == NULL || ks->st == NULL)
	{
		gi_host_ivf_kstate_free(ks);
		gi_host_set_error("ivf set_state: out of memory for %zu bytes", bytes);
		return GI_ERR_NOMEM;
	}
	memcpy(ks->st, state, bytes);
	ks->blocks = gi_host_centroid_blocks(gi_ivf_state_centroids(ks->st), st->nlists, st->dim);
	if (ks->blocks == NULL)
	{
		gi_host_ivf_kstate_free(ks);
		return GI_ERR_NOMEM;
	}
	gi_host_store_set_kind_state(store, ks, gi_host_ivf_kstate_free);
	return GI_OK;
}

static gi_status
gi_host_ivf_kind_search(gi_store *store, const void *params, uint32_t nq,
						const void *queries, size_t query_bytes, uint32_t k,
						gi_hit *hits, uint32_t *found)
{
	const gi_ivf_search_params *p = params;
	const gi_host_ivf_kstate *ks;
	const gi_ivf_state *st;

	if (store == NULL || p == NULL)
	{
		gi_host_set_error("ivf search: no store or no parameters");
		return GI_ERR_INVALID;
	}
	ks = gi_host_store_kind_state(store);
	st = ks ? ks->st : NULL;
	if (st == NULL)
	{
		gi_host_set_error("ivf search: the store has no centroids (set_state was not called)");
		return GI_ERR_INVALID;
	}
	if (p->dim != st->dim || query_bytes != (size_t) nq * st->dim * sizeof(float))
	{
		gi_host_set_error("ivf search: %zu bytes of queries of dimension %u for an index of dimension %u",
						  query_bytes, p->dim, st->dim);
		return GI_ERR_INVALID;
	}
	return gi_host_ivf_search_lists(store, gi_ivf_state_centroids(st), ks->blocks,
									st->dim, (gi_metric) st->metric, nq, queries,
									p->probes, k, hits, found, NULL);
}

const gi_kind_ops gi_host_ivf_kind = {
	.set_state = gi_host_ivf_set_state,
	.search = gi_host_ivf_kind_search,
};
