/*
 * host_ivfpq.c
 *		The IVF-PQ kind on the host: per probed list a look-up table of the
 *		query's distances to every codebook entry, then one table read per
 *		code (distances as defined in gi_kind_ivfpq.h).
 *
 * The selective modes (gi_pq_select.h) turn the same table into integer
 * rewards of the entries within each sub-space's threshold and sum a
 * reward per code.
 *
 * The lists to probe, the threads and the top-k are host_ivf.c's; this
 * file only scores a list's records (a gi_host_list_scorer).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "gi_kind_ivfpq.h"
#include "gi_pq_select.h"
#include "host_store.h"
#include "host_topk.h"

/* the kind's state in a store: the set_state bytes and the density table */
typedef struct gi_host_pq_kind
{
	float	   *radii;			/* GI_PQ_LEVELS * m * ksub, made by the first selective search */
	gi_ivfpq_state *st;			/* the state as set_state received it */
	uint32_t   *blocks;			/* its centroids' gi_host_centroid_blocks */
} gi_host_pq_kind;

/* what a selective search's scorer reads */
typedef struct gi_host_pq_sel
{
	const gi_ivfpq_state *st;
	const float *radii;
	uint32_t	mode;
	uint32_t	level;
	float		scale;
} gi_host_pq_sel;

/*
 * Inner product and cosine: a table depends on the query alone (only the
 * list's constant q.c does not), so a worker keeps the last query's table
 * (selective modes: rewards and sums too) and reuses it.  The cache sits
 * after the tables in the worker's scratch, which starts zeroed.
 */
typedef struct gi_host_pq_cache
{
	const float *q;				/* the query the tables are for; NULL: none */
	double		sum_tau;
	double		unit;
} gi_host_pq_cache;

/* floats of scratch for `tables` floats of tables and the cache after them */
static size_t
gi_host_pq_scratch(size_t tables)
{
	return tables + (sizeof(gi_host_pq_cache) + 2 * sizeof(double)) / sizeof(float);
}

/* floats of a selective scan's tables: the table, the rewards, two thresholds a sub-space */
static size_t
gi_host_pq_sel_tables(uint32_t m, uint32_t ksub)
{
	return (size_t) 2 * m * ksub + 2 * (size_t) m;
}

/* the cache after `tables` floats of a worker's scratch, aligned */
static gi_host_pq_cache *
gi_host_pq_cache_at(float *scratch, size_t tables)
{
	uintptr_t	p = (uintptr_t) (scratch + tables);

	p = (p + sizeof(double) - 1) & ~(uintptr_t) (sizeof(double) - 1);
	return (gi_host_pq_cache *) p;
}

/* true when the worker's tables are already query q's (IP, cosine) */
static bool
gi_host_pq_cached(gi_host_pq_cache *cache, uint32_t metric, const float *q)
{
	if (metric == GI_METRIC_L2)
		return false;
	if (cache->q == q)
		return true;
	cache->q = q;
	return false;
}

static void
gi_host_pq_kind_free(void *p)
{
	gi_host_pq_kind *kind = p;

	free(kind->radii);
	free(kind->st);
	free(kind->blocks);
	free(kind);
}

/*
 * The L2 table of 2-d sub-spaces: the residual's two coordinates once a
 * sub-space, then per entry the same double operations in the same order
 * as the general loop below (two entries at a time with SSE2), so the same
 * values.
 */
static void
gi_host_pq_lut_l2d2(const gi_ivfpq_state *st, const float *q, const float *c,
					const float *books, float *lut)
{
	uint32_t	ksub = st->ksub;

	for (uint32_t s = 0; s < st->m; s++)
	{
		const float *book = books + (size_t) s * ksub * 2;
		double		r0 = (double) q[2 * s] - c[2 * s];
		double		r1 = (double) q[2 * s + 1] - c[2 * s + 1];
		float	   *out = lut + (size_t) s * ksub;
		uint32_t	e = 0;

#ifdef __SSE2__
		__m128d		r = _mm_set_pd(r1, r0);

		for (; e + 2 <= ksub; e += 2)
		{
			__m128		v = _mm_loadu_ps(book + 2 * e);
			__m128d		a = _mm_sub_pd(r, _mm_cvtps_pd(v));
			__m128d		b = _mm_sub_pd(r, _mm_cvtps_pd(_mm_movehl_ps(v, v)));

			a = _mm_mul_pd(a, a);
			b = _mm_mul_pd(b, b);
			/* (x² + y²) of entry e, then of e + 1 */
			_mm_storel_pi((__m64 *) (out + e),
						  _mm_cvtpd_ps(_mm_add_pd(_mm_unpacklo_pd(a, b),
												  _mm_unpackhi_pd(a, b))));
		}
#endif
		for (; e < ksub; e++)
		{
			double		d0 = r0 - book[2 * e];
			double		d1 = r1 - book[2 * e + 1];

			out[e] = (float) (d0 * d0 + d1 * d1);
		}
	}
}

/*
 * The table of one (query, list): lut[s * ksub + e] for sub-space s and
 * entry e (not written when !table); returns the list's constant (IP and
 * cosine: q.c; L2: 0).
 */
static double
gi_host_pq_lut(const gi_ivfpq_state *st, const float *q, uint32_t list, float *lut,
			   bool table)
{
	uint32_t	dim = st->ivf.dim;
	uint32_t	dsub = dim / st->m;
	const float *c = gi_ivfpq_state_centroids(st) + (size_t) list * dim;
	const float *books = gi_ivfpq_state_codebooks(st);
	double		qc = 0.0;
	bool		l2d2 = st->ivf.metric == GI_METRIC_L2 && dsub == 2;

	if (table && l2d2)
		gi_host_pq_lut_l2d2(st, q, c, books, lut);
	for (uint32_t s = 0; table && !l2d2 && s < st->m; s++)
	{
		const float *qs = q + (size_t) s * dsub;
		const float *cs = c + (size_t) s * dsub;
		const float *book = books + (size_t) s * st->ksub * dsub;

		for (uint32_t e = 0; e < st->ksub; e++)
		{
			const float *ev = book + (size_t) e * dsub;
			double		acc = 0.0;

			if (st->ivf.metric == GI_METRIC_L2)
			{
				for (uint32_t j = 0; j < dsub; j++)
				{
					double		d = (double) qs[j] - cs[j] - ev[j];

					acc += d * d;
				}
			}
			else
			{
				for (uint32_t j = 0; j < dsub; j++)
					acc += (double) qs[j] * ev[j];
			}
			lut[(size_t) s * st->ksub + e] = (float) acc;
		}
	}
	if (st->ivf.metric != GI_METRIC_L2)
		for (uint32_t j = 0; j < dim; j++)
			qc += (double) q[j] * c[j];
	return qc;
}

/*
 * The codes of one record word (gi_kind_ivfpq.h: four of 8 bits or eight
 * of 4 bits, from the low bits up) into c[], so that the scans' inner loops
 * read bytes whatever the width.
 */
static inline void
gi_host_pq_word(const uint32_t *word, uint32_t code_bits, uint8_t c[8])
{
	const uint8_t *b = (const uint8_t *) word;

	if (code_bits == 8)
		memcpy(c, b, 4);
	else
		for (uint32_t j = 0; j < 8; j++)
			c[j] = (uint8_t) gi_pq_code_get(b, j, 4);
}

/* the gi_host_list_scorer of the kind */
static void
gi_host_pq_scan(const void *arg, gi_store *store, const float *q, double qnorm2,
				uint32_t list, float *lut, struct gi_host_topk *best)
{
	const gi_ivfpq_state *st = arg;
	uint32_t	ksub = st->ksub;
	uint32_t	cbits = st->code_bits;
	uint32_t	per = 32 / cbits;
	gi_host_pq_cache *cache = gi_host_pq_cache_at(lut, (size_t) st->m * ksub);
	double		base = gi_host_pq_lut(st, q, list, lut,
									 !gi_host_pq_cached(cache, st->ivf.metric, q));
	uint32_t	slab = gi_host_store_list_head(store, list);
	gi_host_slab_view view;

	while (slab != GI_NIL && gi_host_store_slab(store, slab, &view))
	{
		double		acc[GI_SLAB_RECORDS];
		uint32_t	bits;
		uint32_t	i;

		for (i = 0; i < GI_SLAB_RECORDS; i++)
			acc[i] = base;

		/*
		 * Word w of every slot holds the per codes from sub-space w * per
		 * on (gi_kind_ivfpq.h); each slot adds them in sub-space order.
		 * Slots without a valid bit (zeros, or a deleted record's code)
		 * are computed too and never pushed.
		 */
		for (uint32_t w = 0; w * per < st->m; w++)
		{
			const uint32_t *words = view.payload + (size_t) w * GI_SLAB_RECORDS;
			uint32_t	nb = st->m - w * per < per ? st->m - w * per : per;
			const float *row = lut + (size_t) w * per * ksub;

			for (i = 0; i < GI_SLAB_RECORDS; i++)
			{
				uint8_t		c[8];
				double		a = acc[i];

				gi_host_pq_word(words + i, cbits, c);
				for (uint32_t j = 0; j < nb; j++)
					a += c[j] < ksub ? (double) row[j * ksub + c[j]] : NAN;
				acc[i] = a;
			}
		}
		for (bits = view.bitmap; bits; bits &= bits - 1)
		{
			i = (uint32_t) __builtin_ctz(bits);
			gi_host_topk_push(best, gi_pq_finish(st->ivf.metric, acc[i], qnorm2),
							  view.keys[i]);
		}
		slab = view.next;
	}
}

/*
 * The gi_host_list_scorer of the selective modes: per sub-space the
 * smallest table value (in distance sense), the threshold from the
 * density radius of the entry giving it, the rewards of the table, then
 * one reward per code byte summed in 32 bits (a code outside the codebook
 * adds none).  scratch: the table, the rewards, two thresholds a
 * sub-space.
 */
static void
gi_host_pq_scan_sel(const void *arg, gi_store *store, const float *q, double qnorm2,
					uint32_t list, float *lut, struct gi_host_topk *best)
{
	const gi_host_pq_sel *ps = arg;
	const gi_ivfpq_state *st = ps->st;
	uint32_t	m = st->m;
	uint32_t	ksub = st->ksub;
	uint32_t	cbits = st->code_bits;
	uint32_t	per = 32 / cbits;
	uint32_t	dsub = st->ivf.dim / m;
	uint32_t	metric = st->ivf.metric;
	uint32_t	rcap = gi_pq_reward_max(m);
	uint32_t   *reward = (uint32_t *) (lut + (size_t) m * ksub);
	float	   *tau = (float *) (reward + (size_t) m * ksub);
	float	   *tau_in = tau + m;
	gi_host_pq_cache *cache = gi_host_pq_cache_at(lut, gi_host_pq_sel_tables(m, ksub));
	bool		cached = gi_host_pq_cached(cache, metric, q);
	double		qc = gi_host_pq_lut(st, q, list, lut, !cached);
	double		sum_tau = 0.0;
	double		span = 0.0;
	double		rmax = 0.0;
	double		factor = 0.0;
	double		unit;
	uint32_t	slab;
	gi_host_slab_view view;

	for (uint32_t s = 0; !cached && s < m; s++)
	{
		const float *row = lut + (size_t) s * ksub;
		float		vmin = 0.0f;
		uint32_t	emin = 0;
		double		qn = 0.0;

		for (uint32_t e = 0; e < ksub; e++)
		{
			float		v = metric == GI_METRIC_L2 ? row[e] : -row[e];

			if (e == 0 || v < vmin)
			{
				vmin = v;
				emin = e;
			}
		}
		if (metric != GI_METRIC_L2)
		{
			for (uint32_t j = 0; j < dsub; j++)
				qn += (double) q[s * dsub + j] * q[s * dsub + j];
			qn = sqrt(qn);
		}
		tau[s] = gi_pq_threshold(metric, vmin,
								 ps->radii[((size_t) ps->level * m + s) * ksub + emin],
								 qn, ps->scale);
		tau_in[s] = ps->mode != GI_PQ_SEARCH_HITS ? tau[s] :
			gi_pq_threshold(metric, vmin,
							ps->radii[((size_t) gi_pq_inner_level(ps->level) * m + s) * ksub + emin],
							qn, ps->scale);
		sum_tau += tau[s];
		span += (double) tau[s] - vmin;
		if ((double) tau[s] - vmin > rmax)
			rmax = (double) tau[s] - vmin;
	}
	if (cached)
	{
		sum_tau = cache->sum_tau;
		unit = cache->unit;
	}
	else
	{
		factor = gi_pq_factor(rmax, rcap);
		unit = gi_pq_unit(ps->mode, factor, span, m);
		cache->sum_tau = sum_tau;
		cache->unit = unit;
	}
	for (uint32_t s = 0; !cached && s < m; s++)
		for (uint32_t e = 0; e < ksub; e++)
		{
			float		t = lut[(size_t) s * ksub + e];

			reward[(size_t) s * ksub + e] =
				gi_pq_reward(ps->mode, metric == GI_METRIC_L2 ? t : -t, tau_in[s], tau[s],
							 factor, rcap);
		}

	slab = gi_host_store_list_head(store, list);
	while (slab != GI_NIL && gi_host_store_slab(store, slab, &view))
	{
		uint32_t	acc[GI_SLAB_RECORDS] = {0};
		uint32_t	bits;
		uint32_t	i;

		for (uint32_t w = 0; w * per < m; w++)
		{
			const uint32_t *words = view.payload + (size_t) w * GI_SLAB_RECORDS;
			uint32_t	nb = m - w * per < per ? m - w * per : per;
			const uint32_t *row = reward + (size_t) w * per * ksub;

			for (i = 0; i < GI_SLAB_RECORDS; i++)
			{
				uint8_t		c[8];

				gi_host_pq_word(words + i, cbits, c);
				for (uint32_t j = 0; j < nb; j++)
					if (c[j] < ksub)
						acc[i] += row[j * ksub + c[j]];
			}
		}
		for (bits = view.bitmap; bits; bits &= bits - 1)
		{
			i = (uint32_t) __builtin_ctz(bits);
			gi_host_topk_push(best, gi_pq_estimate(metric, acc[i], sum_tau, unit, qc, qnorm2),
							  view.keys[i]);
		}
		slab = view.next;
	}
}

static gi_status
gi_host_ivfpq_set_state(gi_store *store, const void *state, size_t bytes)
{
	const gi_store_params *params;
	const gi_ivfpq_state *st = state;
	gi_host_pq_kind *kind;

	if (store == NULL || state == NULL || bytes < sizeof(gi_ivfpq_state))
	{
		gi_host_set_error("ivfpq set_state: no store or no state");
		return GI_ERR_INVALID;
	}
	params = gi_host_store_params(store);
	if (st->ivf.nlists != params->nlists || st->ivf.dim == 0 || st->m == 0 ||
		st->ivf.dim % st->m != 0 || st->ksub == 0 || st->ksub > GI_PQ_MAX_KSUB ||
		!gi_ivfpq_code_bits_valid(st->code_bits, st->ksub) ||
		gi_ivfpq_record_bytes(st->m, st->code_bits) != params->record_bytes ||
		bytes != gi_ivfpq_state_size(st->ivf.nlists, st->ivf.dim, st->ksub))
	{
		gi_host_set_error("ivfpq set_state: state of %u lists x %u dimensions, %u sub-spaces of %u entries in %u-bit codes (%zu bytes) does not fit a store of %u lists and %u-byte records",
						  st->ivf.nlists, st->ivf.dim, st->m, st->ksub, st->code_bits,
						  bytes, params->nlists, params->record_bytes);
		return GI_ERR_INVALID;
	}
	if (st->ivf.metric != GI_METRIC_L2 && st->ivf.metric != GI_METRIC_IP &&
		st->ivf.metric != GI_METRIC_COSINE)
	{
		gi_host_set_error("ivfpq set_state: unknown metric %u", st->ivf.metric);
		return GI_ERR_INVALID;
	}
	if (!gi_ivfpq_state_finite(st))
	{
		gi_host_set_error("ivfpq set_state: a centroid or codebook value is NaN or infinite");
		return GI_ERR_INVALID;
	}
	kind = calloc(1, sizeof(gi_host_pq_kind));
	if (kind != NULL)
		kind->st = malloc(bytes);
	if (kind == NULL || kind->st == NULL)
	{
		free(kind);
		gi_host_set_error("ivfpq set_state: out of memory for %zu bytes", bytes);
		return GI_ERR_NOMEM;
	}
	memcpy(kind->st, state, bytes);
	kind->blocks = gi_host_centroid_blocks(gi_ivfpq_state_centroids(kind->st),
										   st->ivf.nlists, st->ivf.dim);
	if (kind->blocks == NULL)
	{
		gi_host_pq_kind_free(kind);
		return GI_ERR_NOMEM;
	}
	gi_host_store_set_kind_state(store, kind, gi_host_pq_kind_free);
	return GI_OK;
}

/* the density table of the store, made on first use */
static const float *
gi_host_pq_radii(gi_host_pq_kind *kind)
{
	const gi_ivfpq_state *st = kind->st;
	float	   *radii;
	double	   *work;

	if (kind->radii != NULL)
		return kind->radii;
	radii = malloc((size_t) GI_PQ_LEVELS * st->m * st->ksub * sizeof(float));
	work = malloc((size_t) st->ksub * sizeof(double));
	if (radii == NULL || work == NULL)
	{
		free(radii);
		free(work);
		return NULL;
	}
	gi_pq_radii(gi_ivfpq_state_codebooks(st), st->m, st->ksub, st->ivf.dim / st->m,
				radii, work);
	free(work);
	/* published only once filled */
	kind->radii = radii;
	return radii;
}

static gi_status
gi_host_ivfpq_search(gi_store *store, const void *params, uint32_t nq,
					 const void *queries, size_t query_bytes, uint32_t k,
					 gi_hit *hits, uint32_t *found)
{
	const gi_ivfpq_search_params *p = params;
	gi_host_pq_kind *kind;
	const gi_ivfpq_state *st;
	gi_host_list_scorer scorer;
	gi_host_pq_sel sel;

	if (store == NULL || p == NULL)
	{
		gi_host_set_error("ivfpq search: no store or no parameters");
		return GI_ERR_INVALID;
	}
	kind = gi_host_store_kind_state(store);
	if (kind == NULL)
	{
		gi_host_set_error("ivfpq search: the store has no codebooks (set_state was not called)");
		return GI_ERR_INVALID;
	}
	st = kind->st;
	if (p->ivf.dim != st->ivf.dim || query_bytes != (size_t) nq * st->ivf.dim * sizeof(float))
	{
		gi_host_set_error("ivfpq search: %zu bytes of queries of dimension %u for an index of dimension %u",
						  query_bytes, p->ivf.dim, st->ivf.dim);
		return GI_ERR_INVALID;
	}
	if (!gi_ivfpq_mode_valid(p))
	{
		gi_host_set_error("ivfpq search: mode %u, selection %u, scale %g",
						  p->mode, p->select, (double) p->scale);
		return GI_ERR_INVALID;
	}
	scorer.scan = gi_host_pq_scan;
	scorer.arg = st;
	scorer.scratch_floats = gi_host_pq_scratch((size_t) st->m * st->ksub);
	if (p->mode != GI_PQ_SEARCH_LUT)
	{
		sel.st = st;
		sel.radii = gi_host_pq_radii(kind);
		if (sel.radii == NULL)
		{
			gi_host_set_error("ivfpq search: out of memory for the density table");
			return GI_ERR_NOMEM;
		}
		sel.mode = p->mode;
		sel.level = gi_pq_level(p->select);
		sel.scale = p->scale;
		scorer.scan = gi_host_pq_scan_sel;
		scorer.arg = &sel;
		scorer.scratch_floats = gi_host_pq_scratch(gi_host_pq_sel_tables(st->m, st->ksub));
	}
	return gi_host_ivf_search_lists(store, gi_ivfpq_state_centroids(st), kind->blocks,
									st->ivf.dim,
									(gi_metric) st->ivf.metric, nq, queries,
									p->ivf.probes, k, hits, found, &scorer);
}

const gi_kind_ops gi_host_ivfpq_kind = {
	.set_state = gi_host_ivfpq_set_state,
	.search = gi_host_ivfpq_search,
};
