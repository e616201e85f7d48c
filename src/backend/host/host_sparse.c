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
 * gi_kind_sparse.h.
 */
#include <stdlib.h>
#include <string.h>

#include "gi_kind_sparse.h"
#include "host_store.h"
#include "host_topk.h"

/* the kind's state with a store: its dimension and the scoring scratch */
typedef struct gi_host_sparse
{
	gi_sparse_state st;
	uint32_t	cap;			/* ordinals the scratch holds */
	uint32_t	epoch;			/* stamp of the current query */
	double	   *acc;			/* [cap] score so far */
	uint32_t   *stamp;			/* [cap] query that last touched it */
	uint32_t   *touched;		/* [cap] ordinals touched by this query */
	float	   *bound;			/* [dim] list bounds (gi_kind_sparse.h) */
} gi_host_sparse;

static void
gi_host_sparse_free(void *p)
{
	gi_host_sparse *hs = p;

	free(hs->acc);
	free(hs->stamp);
	free(hs->touched);
	free(hs->bound);
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
		hs->bound = calloc(st->dim, sizeof(float));
	if (hs == NULL || hs->bound == NULL)
	{
		free(hs);
		gi_host_set_error("sparse set_state: out of memory");
		return GI_ERR_NOMEM;
	}
	hs->st = *st;
	gi_host_store_set_kind_state(store, hs, gi_host_sparse_free);
	return GI_OK;
}

/* room for every ordinal the store has handed out */
static gi_status
gi_host_sparse_reserve(gi_host_sparse *hs, uint32_t n)
{
	double	   *acc;
	uint32_t   *stamp;
	uint32_t   *touched;

	if (n <= hs->cap)
		return GI_OK;
	acc = realloc(hs->acc, (size_t) n * sizeof(double));
	if (acc != NULL)
		hs->acc = acc;
	stamp = realloc(hs->stamp, (size_t) n * sizeof(uint32_t));
	if (stamp != NULL)
		hs->stamp = stamp;
	touched = realloc(hs->touched, (size_t) n * sizeof(uint32_t));
	if (touched != NULL)
		hs->touched = touched;
	if (acc == NULL || stamp == NULL || touched == NULL)
	{
		gi_host_set_error("sparse search: out of memory for %u accumulators", n);
		return GI_ERR_NOMEM;
	}
	memset(hs->stamp + hs->cap, 0, (size_t) (n - hs->cap) * sizeof(uint32_t));
	hs->cap = n;
	return GI_OK;
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

/* score one query into hs->acc; returns how many documents it touched */
static uint32_t
gi_host_sparse_score(gi_store *store, gi_host_sparse *hs, uint32_t nnz,
					 const uint32_t *terms, const float *weights)
{
	uint32_t	ntouched = 0;
	uint32_t	i;

	if (++hs->epoch == 0)
	{
		memset(hs->stamp, 0, (size_t) hs->cap * sizeof(uint32_t));
		hs->epoch = 1;
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
				if (hs->stamp[kid] != hs->epoch)
				{
					hs->stamp[kid] = hs->epoch;
					hs->acc[kid] = 0.0;
					hs->touched[ntouched++] = kid;
				}
				hs->acc[kid] += qw * (double) w;
			}
			slab = v.next;
		}
	}
	return ntouched;
}

static gi_status
gi_host_sparse_search(gi_store *store, const void *params, uint32_t nq,
					  const void *queries, size_t query_bytes, uint32_t k,
					  gi_hit *hits, uint32_t *found)
{
	const gi_sparse_search_params *p = params;
	gi_host_sparse *hs;
	gi_host_topk best;
	size_t	   *off;
	gi_status	st;
	uint32_t	q;

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
	if (off == NULL)
	{
		gi_host_set_error("sparse search: out of memory for %u queries", nq);
		return GI_ERR_NOMEM;
	}
	st = gi_host_sparse_parse(queries, query_bytes, nq, hs->st.dim, off);
	if (st == GI_OK)
		st = gi_host_sparse_reserve(hs, gi_host_store_key_ids(store));
	if (st != GI_OK)
	{
		free(off);
		return st;
	}
	best.v = malloc(sizeof(gi_host_cand) * ((size_t) (k < hs->cap ? k : hs->cap) + 1));
	if (best.v == NULL)
	{
		free(off);
		gi_host_set_error("sparse search: out of memory for %u hits", k);
		return GI_ERR_NOMEM;
	}

	for (q = 0; q < nq; q++)
	{
		const unsigned char *qp = (const unsigned char *) queries + off[q];
		uint32_t	nnz;
		const uint32_t *terms;
		const float *weights;
		uint32_t	ntouched;
		uint32_t	i;

		memcpy(&nnz, qp, sizeof(uint32_t));
		terms = (const uint32_t *) (qp + sizeof(uint32_t));
		weights = (const float *) (terms + nnz);
		ntouched = gi_host_sparse_score(store, hs, nnz, terms, weights);

		best.n = 0;
		best.cap = k < ntouched ? k : ntouched;
		for (i = 0; i < ntouched; i++)
		{
			uint32_t	kid = hs->touched[i];

			gi_host_topk_push(&best, (double) (float) -hs->acc[kid],
							  gi_host_store_kid_key(store, kid));
		}
		gi_host_topk_sort(&best);
		for (i = 0; i < k; i++)
		{
			gi_hit	   *h = &hits[(size_t) q * k + i];

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
		found[q] = best.n;
	}
	free(best.v);
	free(off);
	return GI_OK;
}

static void
gi_host_sparse_inserted(gi_store *store, uint32_t n, const uint32_t *lists,
						const void *payloads)
{
	gi_host_sparse *hs = gi_host_store_kind_state(store);

	if (hs != NULL)
		gi_sparse_bound_note(hs->bound, hs->st.dim, n, lists, payloads);
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
