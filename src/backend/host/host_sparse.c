/*
 * host_sparse.c
 *		Exact sparse inner-product search over the host slab store, term at
 *		a time: the reference the CUDA kernels are compared against, and
 *		what a machine without a GPU runs.
 *
 * For each query, the lists of its terms are walked one after the other
 * and each record adds query weight * record weight (in double) to its
 * document's accumulator, indexed by the store's key ordinal; a stamp per
 * ordinal tells which accumulators this query touched, so nothing is
 * cleared between queries.  The touched documents then go through the
 * bounded top-k heap by (float distance, key).  Scores follow
 * gi_kind_sparse.h.  The queries of a call are shared out between the host
 * backend's threads, each with scratch of its own (kept with the store),
 * and every query's answer is computed by one of them alone.
 *
 * A query that can be counted (GENIE's match counts: whole query weights,
 * lists whose records all weigh 1; gi_sparse_count_sum) takes the host's
 * c-PQ instead: 16-bit counters (no stamps: the touched ones are zeroed
 * after the query), a histogram of the touched rows' counts that gives
 * the threshold count of the k-th row (GENIE's ZipperArray and
 * AuditThreshold, computed once at the end), and the heap only for the
 * rows at or above it, where exact ties go by key.
 */
#include <stdlib.h>
#include <string.h>

#include "gi_kind_sparse.h"
#include "host_pool.h"
#include "host_store.h"
#include "host_topk.h"

/* the largest count the c-PQ's 16-bit counters hold */
#define GI_HOST_COUNT_MAX 65535

/*
 * Scratch of one thread scoring queries: the term path's arrays (acc,
 * stamp) and the counting path's (cnt, hist) are made on first use, so
 * a store that is only ever counted holds 6 bytes an ordinal, not 16.
 */
typedef struct gi_host_sparse_scratch
{
	uint32_t	cap;			/* ordinals touched holds */
	uint32_t	acc_cap;		/* ordinals acc and stamp hold */
	uint32_t	cnt_cap;		/* ordinals cnt holds */
	uint32_t	epoch;			/* stamp of the current query */
	double	   *acc;			/* [acc_cap] score so far */
	uint32_t   *stamp;			/* [acc_cap] query that last touched it */
	uint32_t   *touched;		/* [cap] ordinals touched by this query */
	uint16_t   *cnt;			/* [cnt_cap] count so far, 0 between queries */
	uint32_t   *hist;			/* [GI_HOST_COUNT_MAX + 1] rows by count */
} gi_host_sparse_scratch;

/* the kind's state with a store: its dimension, bounds, scratch per thread */
typedef struct gi_host_sparse
{
	gi_sparse_state st;
	uint32_t	nscratch;
	gi_host_sparse_scratch *scratch;	/* [nscratch] */
	float	   *bound;			/* [dim] list bounds (gi_kind_sparse.h) */
	uint8_t    *unit;			/* [dim] 1 while every record weighed 1 */
} gi_host_sparse;

static void
gi_host_sparse_free(void *p)
{
	gi_host_sparse *hs = p;
	uint32_t	w;

	for (w = 0; w < hs->nscratch; w++)
	{
		free(hs->scratch[w].acc);
		free(hs->scratch[w].stamp);
		free(hs->scratch[w].touched);
		free(hs->scratch[w].cnt);
		free(hs->scratch[w].hist);
	}
	free(hs->scratch);
	free(hs->bound);
	free(hs->unit);
	free(hs);
}

static gi_status
gi_host_sparse_set_state(gi_store *store, const void *state, size_t bytes)
{
	const gi_store_params *params;
	const gi_sparse_state *st = state;
	gi_host_sparse *hs;

	if (store == NULL || state == NULL || bytes != sizeof(gi_sparse_state))
	{
		gi_host_set_error("sparse set_state: no store or a state of %zu bytes", bytes);
		return GI_ERR_INVALID;
	}
	params = gi_host_store_params(store);
	if (st->dim != params->nlists || params->record_bytes != sizeof(float))
	{
		gi_host_set_error("sparse set_state: %u dimensions do not fit a store of %u lists and %u-byte records",
						  st->dim, params->nlists, params->record_bytes);
		return GI_ERR_INVALID;
	}
	hs = calloc(1, sizeof(gi_host_sparse));
	if (hs != NULL)
	{
		hs->bound = calloc(st->dim, sizeof(float));
		hs->unit = malloc(st->dim > 0 ? st->dim : 1);
	}
	if (hs == NULL || hs->bound == NULL || hs->unit == NULL)
	{
		if (hs != NULL)
		{
			free(hs->bound);
			free(hs->unit);
		}
		free(hs);
		gi_host_set_error("sparse set_state: out of memory");
		return GI_ERR_NOMEM;
	}
	memset(hs->unit, 1, st->dim);
	hs->st = *st;
	gi_host_store_set_kind_state(store, hs, gi_host_sparse_free);
	return GI_OK;
}

/*
 * Room for every ordinal the store has handed out: the touched list, and
 * the arrays of the term path (acc and stamp) or of the counting path.
 */
static gi_status
gi_host_sparse_reserve(gi_host_sparse_scratch *sc, uint32_t n, bool counting)
{
	if (n > sc->cap)
	{
		uint32_t   *touched = realloc(sc->touched, (size_t) n * sizeof(uint32_t));

		if (touched == NULL)
			goto nomem;
		sc->touched = touched;
		sc->cap = n;
	}
	if (!counting && n > sc->acc_cap)
	{
		double	   *acc = realloc(sc->acc, (size_t) n * sizeof(double));
		uint32_t   *stamp;

		if (acc == NULL)
			goto nomem;
		sc->acc = acc;
		stamp = realloc(sc->stamp, (size_t) n * sizeof(uint32_t));
		if (stamp == NULL)
			goto nomem;
		sc->stamp = stamp;
		memset(sc->stamp + sc->acc_cap, 0, (size_t) (n - sc->acc_cap) * sizeof(uint32_t));
		sc->acc_cap = n;
	}
	if (counting && n > sc->cnt_cap)
	{
		uint16_t   *cnt = realloc(sc->cnt, (size_t) n * sizeof(uint16_t));

		if (cnt == NULL)
			goto nomem;
		sc->cnt = cnt;
		memset(sc->cnt + sc->cnt_cap, 0, (size_t) (n - sc->cnt_cap) * sizeof(uint16_t));
		sc->cnt_cap = n;
	}
	if (counting && sc->hist == NULL)
	{
		sc->hist = calloc(GI_HOST_COUNT_MAX + 1, sizeof(uint32_t));
		if (sc->hist == NULL)
			goto nomem;
	}
	return GI_OK;

nomem:
	gi_host_set_error("sparse search: out of memory for %u accumulators", n);
	return GI_ERR_NOMEM;
}

/*
 * Scratch for up to `workers` threads, each with room for n ordinals;
 * returns how many have it (at least 1, or 0 on failure).  Threads beyond
 * the first are given up rather than fail the search.
 */
static uint32_t
gi_host_sparse_scratch_for(gi_host_sparse *hs, uint32_t workers, uint32_t n,
						   bool plain, bool counting)
{
	uint32_t	w;

	if (workers > hs->nscratch)
	{
		gi_host_sparse_scratch *more = realloc(hs->scratch,
											   sizeof(gi_host_sparse_scratch) * workers);

		if (more != NULL)
		{
			memset(more + hs->nscratch, 0,
				   sizeof(gi_host_sparse_scratch) * (workers - hs->nscratch));
			hs->scratch = more;
			hs->nscratch = workers;
		}
		else if (hs->nscratch == 0)
		{
			gi_host_set_error("sparse search: out of memory");
			return 0;
		}
	}
	for (w = 0; w < workers && w < hs->nscratch; w++)
		if ((plain && gi_host_sparse_reserve(&hs->scratch[w], n, false) != GI_OK) ||
			(counting && gi_host_sparse_reserve(&hs->scratch[w], n, true) != GI_OK))
			break;
	return w;
}

/*
 * Check that queries holds exactly nq well-formed queries of dimension
 * dim; their offsets go to off[].
 */
static gi_status
gi_host_sparse_parse(const void *queries, size_t bytes, uint32_t nq,
					 uint32_t dim, size_t *off)
{
	const unsigned char *p = queries;
	size_t		at = 0;
	uint32_t	q;

	for (q = 0; q < nq; q++)
	{
		uint32_t	nnz;
		const uint32_t *terms;
		uint32_t	i;

		if (bytes - at < sizeof(uint32_t))
			break;
		memcpy(&nnz, p + at, sizeof(uint32_t));
		if (nnz > dim || (bytes - at) < gi_sparse_query_bytes(nnz))
			break;
		terms = (const uint32_t *) (p + at + sizeof(uint32_t));
		for (i = 0; i < nnz; i++)
			if (terms[i] >= dim || (i > 0 && terms[i] <= terms[i - 1]))
			{
				gi_host_set_error("sparse search: query %u has term %u out of order or beyond %u dimensions",
								  q, terms[i], dim);
				return GI_ERR_INVALID;
			}
		off[q] = at;
		at += gi_sparse_query_bytes(nnz);
	}
	if (q < nq || at != bytes)
	{
		gi_host_set_error("sparse search: %zu bytes do not hold %u queries", bytes, nq);
		return GI_ERR_INVALID;
	}
	return GI_OK;
}

/* score one query into sc->acc; returns how many documents it touched */
static uint32_t
gi_host_sparse_score(gi_store *store, gi_host_sparse_scratch *sc, uint32_t nnz,
					 const uint32_t *terms, const float *weights)
{
	uint32_t	ntouched = 0;
	uint32_t	i;

	if (++sc->epoch == 0)
	{
		memset(sc->stamp, 0, (size_t) sc->cap * sizeof(uint32_t));
		sc->epoch = 1;
	}
	for (i = 0; i < nnz; i++)
	{
		double		qw = weights[i];
		uint32_t	slab = gi_host_store_list_head(store, terms[i]);
		gi_host_slab_view v;

		while (slab != GI_NIL && gi_host_store_slab(store, slab, &v))
		{
			uint32_t	bits = v.bitmap;

			while (bits)
			{
				uint32_t	slot = (uint32_t) __builtin_ctz(bits);
				uint32_t	kid = v.kids[slot];
				float		w;

				bits &= bits - 1;
				memcpy(&w, &v.payload[slot], sizeof(float));
				if (sc->stamp[kid] != sc->epoch)
				{
					sc->stamp[kid] = sc->epoch;
					sc->acc[kid] = 0.0;
					sc->touched[ntouched++] = kid;
				}
				sc->acc[kid] += qw * (double) w;
			}
			slab = v.next;
		}
	}
	return ntouched;
}

/* count one query into sc->cnt; returns how many documents it touched */
static uint32_t
gi_host_sparse_count(gi_store *store, gi_host_sparse_scratch *sc, uint32_t nnz,
					 const uint32_t *terms, const float *weights)
{
	uint32_t	ntouched = 0;
	uint32_t	i;

	for (i = 0; i < nnz; i++)
	{
		uint16_t	qw = (uint16_t) weights[i];
		uint32_t	slab = gi_host_store_list_head(store, terms[i]);
		gi_host_slab_view v;

		while (slab != GI_NIL && gi_host_store_slab(store, slab, &v))
		{
			uint32_t	bits = v.bitmap;

			while (bits)
			{
				uint32_t	kid = v.kids[__builtin_ctz(bits)];

				bits &= bits - 1;
				if (sc->cnt[kid] == 0)
					sc->touched[ntouched++] = kid;
				sc->cnt[kid] += qw;
			}
			slab = v.next;
		}
	}
	return ntouched;
}

/*
 * The k best of the counted rows into best (then sorted): the histogram of
 * their counts gives the count t of the k-th; only rows counted t or more
 * go through the heap, where ties at t are settled by key.  Leaves the
 * counters and the histogram zeroed.
 */
static void
gi_host_sparse_count_select(gi_store *store, gi_host_sparse_scratch *sc,
							uint32_t ntouched, uint32_t maxc, uint32_t k,
							gi_host_topk *best)
{
	uint32_t	t = 1;
	uint32_t	above = 0;
	uint32_t	c;
	uint32_t	i;

	for (i = 0; i < ntouched; i++)
		sc->hist[sc->cnt[sc->touched[i]]]++;
	for (c = maxc; c >= 1; c--)
	{
		above += sc->hist[c];
		if (above >= k)
		{
			t = c;
			break;
		}
	}
	memset(sc->hist, 0, ((size_t) maxc + 1) * sizeof(uint32_t));
	for (i = 0; i < ntouched; i++)
	{
		uint32_t	kid = sc->touched[i];

		if (sc->cnt[kid] >= t)
			gi_host_topk_push(best, -(double) sc->cnt[kid],
							  gi_host_store_kid_key(store, kid));
		sc->cnt[kid] = 0;
	}
	gi_host_topk_sort(best);
}

/* what the tasks of one search share */
typedef struct gi_host_sparse_job
{
	gi_store   *store;
	gi_host_sparse *hs;
	const unsigned char *queries;
	const size_t *off;			/* [nq] where each query starts */
	const uint32_t *csum;		/* [nq] highest count, 0: not counted */
	uint32_t	nq;
	uint32_t	qchunk;			/* queries a task */
	uint32_t	k;
	uint32_t	bestcap;		/* heap room a worker */
	gi_host_cand *best;			/* [workers][bestcap] */
	gi_hit	   *hits;
	uint32_t   *found;
} gi_host_sparse_job;

/* task: queries [task * qchunk, ...) */
static gi_status
gi_host_sparse_task(void *arg, uint32_t task, uint32_t worker)
{
	const gi_host_sparse_job *job = arg;
	gi_host_sparse_scratch *sc = &job->hs->scratch[worker];
	uint32_t	first = task * job->qchunk;
	uint32_t	end = job->nq - first < job->qchunk ? job->nq : first + job->qchunk;
	gi_host_topk best;
	uint32_t	q;

	best.v = job->best + (size_t) worker * job->bestcap;
	for (q = first; q < end; q++)
	{
		const unsigned char *qp = job->queries + job->off[q];
		uint32_t	nnz;
		const uint32_t *terms;
		const float *weights;
		uint32_t	ntouched;
		uint32_t	i;

		memcpy(&nnz, qp, sizeof(uint32_t));
		terms = (const uint32_t *) (qp + sizeof(uint32_t));
		weights = (const float *) (terms + nnz);
		best.n = 0;
		if (job->csum[q] > 0)
		{
			ntouched = gi_host_sparse_count(job->store, sc, nnz, terms, weights);
			best.cap = job->k < ntouched ? job->k : ntouched;
			gi_host_sparse_count_select(job->store, sc, ntouched, job->csum[q],
										best.cap, &best);
		}
		else
		{
			ntouched = gi_host_sparse_score(job->store, sc, nnz, terms, weights);
			best.cap = job->k < ntouched ? job->k : ntouched;
			for (i = 0; i < ntouched; i++)
			{
				uint32_t	kid = sc->touched[i];

				gi_host_topk_push(&best, (double) (float) -sc->acc[kid],
								  gi_host_store_kid_key(job->store, kid));
			}
			gi_host_topk_sort(&best);
		}
		for (i = 0; i < job->k; i++)
		{
			gi_hit	   *h = &job->hits[(size_t) q * job->k + i];

			h->pad = 0;
			if (i < best.n)
			{
				h->key = best.v[i].id;
				h->distance = (float) best.v[i].dist;
			}
			else
			{
				h->key = 0;
				h->distance = __builtin_inff();
			}
		}
		job->found[q] = best.n;
	}
	return GI_OK;
}

static gi_status
gi_host_sparse_search(gi_store *store, const void *params, uint32_t nq,
					  const void *queries, size_t query_bytes, uint32_t k,
					  gi_hit *hits, uint32_t *found)
{
	const gi_sparse_search_params *p = params;
	gi_host_sparse *hs;
	gi_host_sparse_job job;
	gi_store_stats stats;
	size_t	   *off;
	gi_status	st;
	uint32_t	kids;
	uint32_t	workers;
	size_t		per_worker;
	uint32_t   *csum;
	uint32_t	q;
	bool		plain = false;
	bool		counting = false;

	if (store == NULL || p == NULL)
	{
		gi_host_set_error("sparse search: no store or no parameters");
		return GI_ERR_INVALID;
	}
	hs = gi_host_store_kind_state(store);
	if (hs == NULL)
	{
		gi_host_set_error("sparse search: the store has no state (set_state was not called)");
		return GI_ERR_INVALID;
	}
	if (p->dim != hs->st.dim)
	{
		gi_host_set_error("sparse search: queries of %u dimensions for an index of %u",
						  p->dim, hs->st.dim);
		return GI_ERR_INVALID;
	}
	if (nq == 0)
		return GI_OK;
	if (queries == NULL || found == NULL || (k > 0 && hits == NULL))
	{
		gi_host_set_error("sparse search: queries, hits and found must not be NULL");
		return GI_ERR_INVALID;
	}
	off = malloc((size_t) nq * sizeof(size_t));
	csum = calloc(nq, sizeof(uint32_t));
	if (off == NULL || csum == NULL)
	{
		free(off);
		free(csum);
		gi_host_set_error("sparse search: out of memory for %u queries", nq);
		return GI_ERR_NOMEM;
	}
	st = gi_host_sparse_parse(queries, query_bytes, nq, hs->st.dim, off);
	if (st != GI_OK)
	{
		free(off);
		free(csum);
		return st;
	}

	/* which queries are counted (c-PQ), which scored term at a time */
	for (q = 0; q < nq; q++)
	{
		const unsigned char *qp = (const unsigned char *) queries + off[q];
		uint32_t	nnz;

		memcpy(&nnz, qp, sizeof(uint32_t));
		if (p->method != GI_SPARSE_TERM && p->method != GI_SPARSE_DOC)
			csum[q] = gi_sparse_count_sum(hs->unit, nnz,
										  (const uint32_t *) (qp + sizeof(uint32_t)),
										  (const float *) (qp + sizeof(uint32_t)) + nnz,
										  GI_HOST_COUNT_MAX);
		if (csum[q] > 0)
			counting = true;
		else
			plain = true;
	}

	/*
	 * Threads: for enough work (about a query's weight pairs times a list's
	 * mean length), and as many as their scratch allows.
	 */
	kids = gi_host_store_key_ids(store);
	gi_host_backend()->store_stats(store, &stats);
	per_worker = (size_t) kids * ((plain ? sizeof(double) + sizeof(uint32_t) : 0) +
								  (counting ? sizeof(uint16_t) : 0) + sizeof(uint32_t)) + 1;
	workers = nq > 1 &&
		gi_host_pool_worth(query_bytes / 8 * (stats.rows / hs->st.dim + 1)) ?
		gi_host_pool_threads() : 1;
	if (workers > nq)
		workers = nq;
	if (workers > 1 && GI_HOST_POOL_SCRATCH / per_worker + 1 < workers)
		workers = (uint32_t) (GI_HOST_POOL_SCRATCH / per_worker + 1);
	workers = gi_host_sparse_scratch_for(hs, workers, kids, plain, counting);
	if (workers == 0)
	{
		free(off);
		free(csum);
		return GI_ERR_NOMEM;
	}

	memset(&job, 0, sizeof(job));
	job.store = store;
	job.hs = hs;
	job.queries = queries;
	job.off = off;
	job.csum = csum;
	job.nq = nq;
	job.qchunk = workers > 1 ? nq / (4 * workers) : nq;
	if (job.qchunk == 0)
		job.qchunk = 1;
	job.k = k;
	job.bestcap = (k < kids ? k : kids) + 1;
	job.hits = hits;
	job.found = found;
	job.best = malloc(sizeof(gi_host_cand) * job.bestcap * workers);
	if (job.best == NULL)
	{
		free(off);
		free(csum);
		gi_host_set_error("sparse search: out of memory for %u hits", k);
		return GI_ERR_NOMEM;
	}
	st = gi_host_pool_run((nq + job.qchunk - 1) / job.qchunk, workers,
						  gi_host_sparse_task, &job);
	free(job.best);
	free(off);
	free(csum);
	return st;
}

static void
gi_host_sparse_inserted(gi_store *store, uint32_t n, const uint32_t *lists,
						const void *payloads)
{
	gi_host_sparse *hs = gi_host_store_kind_state(store);

	if (hs != NULL)
	{
		gi_sparse_bound_note(hs->bound, hs->st.dim, n, lists, payloads);
		gi_sparse_unit_note(hs->unit, hs->st.dim, n, lists, payloads);
	}
}

static gi_status
gi_host_sparse_list_bounds(gi_store *store, uint32_t first, uint32_t n, float *out)
{
	gi_host_sparse *hs = gi_host_store_kind_state(store);

	if (hs == NULL || first > hs->st.dim || n > hs->st.dim - first)
	{
		gi_host_set_error("sparse list bounds: lists %u to %u of a store without them",
						  first, first + n);
		return GI_ERR_INVALID;
	}
	memcpy(out, hs->bound + first, (size_t) n * sizeof(float));
	return GI_OK;
}

const gi_kind_ops gi_host_sparse_kind = {
	.set_state = gi_host_sparse_set_state,
	.search = gi_host_sparse_search,
	.inserted = gi_host_sparse_inserted,
	.list_bounds = gi_host_sparse_list_bounds,
};
