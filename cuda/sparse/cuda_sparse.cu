/*
 * cuda_sparse.cu
 *		The sparse kind's entries (gi_kind_ops, layouts in
 *		gi_kind_sparse.h): set_state checks the store's shape; search
 *		validates the queries as the host does, chooses the scoring kernel,
 *		cuts the batch into sub-batches of queries and ranges of key
 *		ordinals under a scratch budget, and runs scoring, selection and
 *		ordering for each (cuda/README.md, "Search (the sparse kind)").
 */
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include "cuda_sparse.h"
#include "cuda_util.cuh"

/* default scratch budget: min(this, half the free device memory) */
#define GI_SP_BUDGET_MAX ((size_t) 4 << 30)
#define GI_SP_BUDGET_MIN ((size_t) 16 << 20)

/* narrowest ordinal range the planner cuts */
#define GI_SP_SPAN_MIN 256

/* chunks of one sub-batch at most (the kernels index them in 32 bits) */
#define GI_SP_CHUNKS_MAX ((uint64_t) 1 << 30)

/*
 * The chooser's cost model in nanoseconds per posting, fitted to the
 * microbenchmark on an H100 (cuda/README.md, "Choosing the kernel"): the
 * term path per posting of every (query, term) list; the document path
 * per posting of the union of the batch's lists, once for its forward
 * index and once per group of 32 queries for the scoring.
 */
#define GI_SP_COST_TERM 0.007
#define GI_SP_COST_BUILD 0.055
#define GI_SP_COST_DOC 0.07

static size_t gi_sp_budget_override;	/* test hook; 0: the default */
static int	gi_sp_slab_order = -1;	/* test hook; -1: the default */
static int	gi_sp_tiles = -1;	/* test hook; -1: the default */
static uint32_t gi_sp_tile_band;	/* test hook; 0: gi_sp_band_ords */
static int	gi_sp_profiling;

/*
 * The counting path counts in tiles while a band's blocks would read each
 * slab of the lists at most this many times on average (slabs straddle
 * bands; deletes and reuse widen them), else by the plain scatter.
 */
#define GI_SP_TILE_READS_MAX 1.5

extern "C" void
gi_cuda_sparse_set_budget(size_t bytes)
{
	gi_sp_budget_override = bytes;
}

extern "C" void
gi_cuda_sparse_set_slab_order(int mode)
{
	gi_sp_slab_order = mode;
}

extern "C" void
gi_cuda_sparse_set_count_tiles(int mode, uint32_t band)
{
	gi_sp_tiles = mode;
	gi_sp_tile_band = band;
}

static double
gi_sp_now_ms(void)
{
	return (double) gi_cu_now_ns() * 1e-6;
}

static void
gi_cu_sparse_free(gi_store *s, void *kstate)
{
	gi_cu_sparse *sp = (gi_cu_sparse *) kstate;
	gi_cu_buf  *bufs[] = {
		&sp->s_up, &sp->s_acc, &sp->s_cd, &sp->s_ck, &sp->s_xd, &sp->s_xk, &sp->s_fd,
		&sp->s_fk, &sp->s_gd, &sp->s_gk, &sp->s_cnt, &sp->s_beg, &sp->s_sel, &sp->s_hist,
		&sp->s_thr, &sp->s_tmp, &sp->s_hits, &sp->s_fcnt, &sp->s_foff, &sp->s_fwd, &sp->s_ord
	};

	if (sp == NULL)
		return;
	if (s->ss)
		cudaStreamSynchronize(s->ss);
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		gi_cu_buf_free(bufs[i]);
	gi_cu_slabdir_free(&sp->dir);
	gi_cu_sp_bands_free(sp);
	gi_cu_pinned_free(&sp->p_up);
	gi_cu_pinned_free(&sp->p_res);
	free(sp->h_q.p);
	free(sp->h_hash.p);
	free(sp->h_foff.p);
	free(sp->h_units.p);
	free(sp->bound);
	free(sp->unit);
	delete sp;
}

static gi_status
gi_cu_sparse_set_state(gi_store *s, const void *state, size_t bytes)
{
	gi_sparse_state st;
	gi_cu_sparse *sp;
	gi_status	rc;

	if (s == NULL || state == NULL || bytes != sizeof(gi_sparse_state))
	{
		gi_cu_set_error("sparse set_state: no store or a state of %zu bytes", bytes);
		return GI_ERR_INVALID;
	}
	memcpy(&st, state, sizeof(st));
	if (st.dim != s->params.nlists || s->params.record_bytes != sizeof(float))
	{
		gi_cu_set_error("sparse set_state: %u dimensions do not fit a store of %u lists and %u-byte records",
						st.dim, s->params.nlists, s->params.record_bytes);
		return GI_ERR_INVALID;
	}
	rc = gi_cu_enter(s->dev);
	if (rc != GI_OK)
		return rc;

	std::lock_guard<std::mutex> guard(s->mu);

	sp = (gi_cu_sparse *) gi_cu_kstate(s, GI_KIND_SPARSE);
	if (sp == NULL)
	{
		sp = new(std::nothrow) gi_cu_sparse();
		if (sp == NULL)
		{
			gi_cu_set_error("sparse set_state: out of memory");
			return GI_ERR_NOMEM;
		}
		gi_cu_set_kstate(s, GI_KIND_SPARSE, sp, gi_cu_sparse_free);
	}
	if (sp->bound == NULL || sp->unit == NULL || sp->dim != st.dim)
	{
		float	   *b = (float *) calloc(st.dim, sizeof(float));
		uint8_t    *u = (uint8_t *) malloc(st.dim > 0 ? st.dim : 1);

		if (b == NULL || u == NULL)
		{
			free(b);
			free(u);
			gi_cu_set_error("sparse set_state: out of memory");
			return GI_ERR_NOMEM;
		}
		memset(u, 1, st.dim);
		free(sp->bound);
		free(sp->unit);
		sp->bound = b;
		sp->unit = u;
	}
	sp->dim = st.dim;
	return GI_OK;
}

static void
gi_cu_sparse_inserted(gi_store *s, uint32_t n, const uint32_t *lists, const void *payloads)
{
	gi_cu_sparse *sp;

	if (s == NULL)
		return;
	std::lock_guard<std::mutex> guard(s->mu);
	sp = (gi_cu_sparse *) gi_cu_kstate(s, GI_KIND_SPARSE);
	if (sp != NULL && sp->bound != NULL)
		gi_sparse_bound_note(sp->bound, sp->dim, n, lists, payloads);
	if (sp != NULL && sp->unit != NULL)
		gi_sparse_unit_note(sp->unit, sp->dim, n, lists, payloads);
}

static gi_status
gi_cu_sparse_list_bounds(gi_store *s, uint32_t first, uint32_t n, float *out)
{
	gi_cu_sparse *sp;

	if (s == NULL)
	{
		gi_cu_set_error("sparse list bounds: no store");
		return GI_ERR_INVALID;
	}
	std::lock_guard<std::mutex> guard(s->mu);
	sp = (gi_cu_sparse *) gi_cu_kstate(s, GI_KIND_SPARSE);
	if (sp == NULL || sp->bound == NULL || first > sp->dim || n > sp->dim - first)
	{
		gi_cu_set_error("sparse list bounds: lists %u to %u of a store without them",
						first, first + n);
		return GI_ERR_INVALID;
	}
	memcpy(out, sp->bound + first, (size_t) n * sizeof(float));
	return GI_OK;
}

/* ---- queries ----------------------------------------------------------------- */

struct gi_sp_query
{
	uint32_t	nnz;
	const uint32_t *terms;
	const float *w;
	uint64_t	postings;		/* live records of its terms' lists */
};

/*
 * Exactly nq well-formed queries of dimension dim in bytes (the host's
 * rules and messages); their views go to qv[].
 */
static gi_status
gi_sp_parse(const void *queries, size_t bytes, uint32_t nq, uint32_t dim, gi_sp_query *qv)
{
	const unsigned char *p = (const unsigned char *) queries;
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
				gi_cu_set_error("sparse search: query %u has term %u out of order or beyond %u dimensions",
								q, terms[i], dim);
				return GI_ERR_INVALID;
			}
		qv[q].nnz = nnz;
		qv[q].terms = terms;
		qv[q].w = (const float *) (terms + nnz);
		qv[q].postings = 0;
		at += gi_sparse_query_bytes(nnz);
	}
	if (q < nq || at != bytes)
	{
		gi_cu_set_error("sparse search: %zu bytes do not hold %u queries", bytes, nq);
		return GI_ERR_INVALID;
	}
	return GI_OK;
}

/* ---- the union of a batch's terms: open addressing, term + 1 -> index ---- */

struct gi_sp_hent
{
	uint32_t	term1;			/* term + 1, 0 = empty */
	uint32_t	u;
};

struct gi_sp_union
{
	gi_sp_hent *t;
	uint32_t	mask;
	uint32_t	n;
};

static bool
gi_sp_union_init(gi_cu_hbuf *hb, gi_sp_union *un, uint64_t maxterms)
{
	uint64_t	cap = 64;

	while (cap < 2 * maxterms + 2)
		cap <<= 1;
	if (cap > ((uint64_t) 1 << 31) || !gi_cu_hbuf_reserve(hb, (size_t) cap * sizeof(gi_sp_hent)))
		return false;
	un->t = (gi_sp_hent *) hb->p;
	un->mask = (uint32_t) (cap - 1);
	un->n = 0;
	memset(un->t, 0, (size_t) cap * sizeof(gi_sp_hent));
	return true;
}

/* the term's index in the union, added when new (*added set) */
static inline uint32_t
gi_sp_union_add(gi_sp_union *un, uint32_t term, bool *added)
{
	uint32_t	i = (term * 0x9E3779B1u) & un->mask;

	*added = false;
	while (un->t[i].term1 != 0)
	{
		if (un->t[i].term1 == term + 1)
			return un->t[i].u;
		i = (i + 1) & un->mask;
	}
	un->t[i].term1 = term + 1;
	un->t[i].u = un->n;
	*added = true;
	return un->n++;
}

/* ---- planning -------------------------------------------------------------- */

struct gi_sp_plan
{
	uint32_t	method;			/* GI_SPARSE_TERM, GI_SPARSE_DOC or GI_SPARSE_COUNT */
	uint32_t	maxc;			/* counting path: the largest count */
	uint32_t	cap;			/* counting path: candidates per query */
	uint32_t	H;				/* ordinals in use (kid_hwm) */
	uint32_t	span;			/* ordinals per range */
	uint32_t	nr;				/* ranges */
	uint32_t	kf;				/* min(k, H): hits a query can have */
	uint32_t	kr;				/* min(k, span): winners per range */
	uint32_t	nsub;			/* queries per sub-batch at most */
	bool		by_slab;		/* term path: units by term and query block, slab order */
	uint32_t	band;			/* counting path: ordinals a tiled block counts (0: scatter) */
	size_t		budget;
};

static size_t
gi_sp_budget(void)
{
	size_t		fr = 0;
	size_t		tot = 0;
	size_t		b;

	if (gi_sp_budget_override)
		return gi_sp_budget_override;
	if (cudaMemGetInfo(&fr, &tot) != cudaSuccess)
	{
		cudaGetLastError();
		fr = 0;
	}
	b = fr / 2 < GI_SP_BUDGET_MAX ? fr / 2 : GI_SP_BUDGET_MAX;
	return b < GI_SP_BUDGET_MIN ? GI_SP_BUDGET_MIN : b;
}

/* scratch bytes per query of a sub-batch for ranges of span ordinals */
static size_t
gi_sp_per_query(const gi_sp_plan *pl, uint32_t span)
{
	uint32_t	nr = (uint32_t) (((uint64_t) pl->H + span - 1) / span);
	uint32_t	kr = pl->kf < span ? pl->kf : span;
	size_t		b = (size_t) span * (sizeof(double) + sizeof(uint32_t) + sizeof(uint64_t));

	if (nr > 1)
		b += (size_t) nr * kr * (sizeof(uint32_t) + sizeof(uint64_t));
	b += (size_t) pl->kf * (sizeof(uint32_t) + sizeof(uint64_t) + sizeof(gi_hit));
	if (pl->kf > 4096)
		b += (size_t) pl->kf * (sizeof(uint32_t) + sizeof(uint64_t)) * 2;
	return b + GI_SP_BINS * sizeof(uint32_t) + sizeof(gi_sp_sel) + 64;
}

/*
 * Ranges and sub-batch size.  The term path reads each query's lists once
 * whatever the sub-batch, but once per range: the whole ordinal space in
 * one range when a query's share fits the budget, else halved until it
 * does, and as many queries as fit.  The document path reads the union's
 * postings once per sub-batch and range and its index is worth more the
 * more queries share it: the whole batch in one sub-batch (up to 65,535
 * queries, and as many as the query tables allow, gi_sp_prepare), ranges
 * narrow enough for that, in half the budget (the forward index and the
 * query tables take a quarter each).
 */
static void
gi_sp_plan_sizes(gi_sp_plan *pl, uint32_t nq)
{
	size_t		bq = pl->method == GI_SPARSE_DOC ? pl->budget / 2 : pl->budget;
	size_t		want = pl->method == GI_SPARSE_DOC ? (nq < 65535 ? nq : 65535) : 1;
	uint32_t	span = pl->H;
	size_t		per;
	size_t		n;

	while ((per = gi_sp_per_query(pl, span)) * want > bq && span > GI_SP_SPAN_MIN)
		span = (span + 1) / 2;
	pl->span = span;
	pl->nr = (uint32_t) (((uint64_t) pl->H + span - 1) / span);
	pl->kr = pl->kf < span ? pl->kf : span;
	n = bq / per;
	if (n < 1)
		n = 1;
	if (n > nq)
		n = nq;
	if (n > 65535)
		n = 65535;
	pl->nsub = (uint32_t) n;
}

/*
 * The chooser (GI_SPARSE_AUTO): the term path costs its scattered
 * postings; the document path the union's postings once (forward index)
 * plus once per group of 32 queries (scoring).
 */
static uint32_t
gi_sp_choose(uint64_t p_term, uint64_t p_union, uint32_t nq)
{
	double		groups = (double) ((nq + 31) / 32);
	double		t_term = GI_SP_COST_TERM * (double) p_term;
	double		t_doc = (GI_SP_COST_BUILD + GI_SP_COST_DOC * groups) * (double) p_union;

	return t_doc < t_term ? GI_SPARSE_DOC : GI_SPARSE_TERM;
}

/* ---- one sub-batch ----------------------------------------------------------- */

/* device views of a sub-batch's uploaded tables */
struct gi_sp_batch
{
	uint32_t	qa;				/* first query */
	uint32_t	n;				/* queries */
	uint32_t	nu;				/* units */
	uint32_t	nchunks;
	uint32_t	nterms;			/* union terms (document path) */
	uint32_t	npad;			/* queries rounded up to 32 (document path) */
	const gi_sp_unit *units;
	const uint32_t *prefix;
	const gi_sp_qw *pairs;		/* term path */
	const float *qw;			/* document path */
	const uint32_t *pm;
};

static inline size_t
gi_sp_align16(size_t x)
{
	return (x + 15) & ~(size_t) 15;
}

/*
 * Build and upload the sub-batch starting at query qa: the term path
 * takes queries while the chunk count stays under GI_SP_CHUNKS_MAX; the
 * document path also while the union tables fit a quarter of the budget.
 * Both make a unit per term of the sub-batch's union; the term path adds
 * the (query, weight) pairs of each unit, the document path the weight
 * and presence tables.
 */
static gi_status
gi_sp_prepare(gi_store *s, gi_cu_sparse *sp, const gi_sp_plan *pl, const gi_sp_query *qv,
			  uint32_t nq, uint32_t qa, gi_sp_batch *b)
{
	const bool doc = pl->method == GI_SPARSE_DOC;
	const gi_cu_slabdir *dir = &sp->dir;
	uint64_t	nterms_max = 0;
	uint64_t	chunks = 0;
	uint32_t	nu = 0;
	uint32_t	n = 0;
	uint32_t	i;
	uint32_t	j;
	size_t		off_prefix;
	size_t		off_pairs;
	uint32_t	npairs = 0;
	size_t		off_qw;
	size_t		off_pm;
	size_t		bytes;
	uint32_t	groups;
	unsigned char *up;
	gi_sp_union un;
	gi_sp_unit *units;
	uint32_t   *prefix;
	gi_status	st;

	memset(&un, 0, sizeof(un));
	memset(b, 0, sizeof(*b));
	/* which queries: at least one */
	for (i = qa; i < nq && n < pl->nsub; i++)
	{
		uint64_t	c = 0;
		uint64_t	qu = 0;

		for (j = 0; j < qv[i].nnz; j++)
		{
			uint32_t	ns = gi_cu_slabdir_count(dir, qv[i].terms[j]);

			c += (ns + GI_SP_CHUNK - 1) / GI_SP_CHUNK;
			qu += ns > 0;
		}
		if (n > 0)
		{
			if (!doc && chunks + c > GI_SP_CHUNKS_MAX)
				break;
			if (doc && ((nterms_max + qu) * ((n + 32) & ~31u) * 2 * sizeof(float) > pl->budget / 4 ||
						chunks + c > GI_SP_CHUNKS_MAX))
				break;
		}
		chunks += c;
		nterms_max += qu;
		nu += (uint32_t) qu;
		n++;
	}
	b->qa = qa;
	b->n = n;
	b->npad = (n + 31) & ~31u;
	groups = b->npad / 32;

	/* the upload: units | prefix | (term path) pairs | (document path) weights | masks */
	if (!gi_sp_union_init(&sp->h_hash, &un, nterms_max))
	{
		gi_cu_set_error("sparse search: out of memory for the union of %llu terms",
						(unsigned long long) nterms_max);
		return GI_ERR_NOMEM;
	}
	off_prefix = gi_sp_align16((size_t) nu * sizeof(gi_sp_unit));
	off_pairs = gi_sp_align16(off_prefix + ((size_t) nu + 1) * sizeof(uint32_t));
	off_qw = off_pairs + (doc ? 0 : gi_sp_align16((size_t) nu * sizeof(gi_sp_qw)));
	off_pm = off_qw + (doc ? gi_sp_align16(nterms_max * b->npad * sizeof(float)) : 0);
	bytes = off_pm + (doc ? (size_t) nterms_max * groups * sizeof(uint32_t) : 0) + 16;
	st = gi_cu_pinned_reserve(&sp->p_up, bytes);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_up, bytes);
	if (st != GI_OK)
		return st;
	up = (unsigned char *) sp->p_up.p;
	units = (gi_sp_unit *) up;
	prefix = (uint32_t *) (up + off_prefix);
	nu = 0;
	if (!doc && !pl->by_slab)
	{
		gi_sp_qw   *pairs = (gi_sp_qw *) (up + off_pairs);

		/* the rows fit the L2: a unit per (query, term), in query order */
		for (i = 0; i < n; i++)
		{
			const gi_sp_query *q = &qv[qa + i];

			for (j = 0; j < q->nnz; j++)
			{
				uint32_t	t = q->terms[j];
				uint32_t	ns = gi_cu_slabdir_count(dir, t);

				if (ns == 0)
					continue;
				units[nu].q = nu;
				units[nu].beg = gi_cu_slabdir_begin(dir, t);
				units[nu].n = ns;
				units[nu].nq = 1;
				pairs[nu].q = i;
				pairs[nu].w = q->w[j];
				nu++;
			}
		}
		npairs = nu;
		b->nterms = 0;
	}
	else if (!doc)
	{
		gi_sp_qw   *pairs = (gi_sp_qw *) (up + off_pairs);

		/* the union's units with their pair counts, then each unit's pairs */
		for (i = 0; i < n; i++)
		{
			const gi_sp_query *q = &qv[qa + i];

			for (j = 0; j < q->nnz; j++)
			{
				uint32_t	t = q->terms[j];
				uint32_t	ns = gi_cu_slabdir_count(dir, t);
				uint32_t	u;
				bool		added;

				if (ns == 0)
					continue;
				u = gi_sp_union_add(&un, t, &added);
				if (added)
				{
					units[u].beg = gi_cu_slabdir_begin(dir, t);
					units[u].n = ns;
					units[u].nq = 0;
					nu++;
				}
				units[u].nq++;
			}
		}
		for (i = 0; i < nu; i++)
		{
			units[i].q = npairs;
			npairs += units[i].nq;
			units[i].nq = 0;
		}
		for (i = 0; i < n; i++)
		{
			const gi_sp_query *q = &qv[qa + i];

			for (j = 0; j < q->nnz; j++)
			{
				uint32_t	t = q->terms[j];
				uint32_t	u;
				bool		added;

				if (gi_cu_slabdir_count(dir, t) == 0)
					continue;
				u = gi_sp_union_add(&un, t, &added);
				pairs[units[u].q + units[u].nq].q = i;
				pairs[units[u].q + units[u].nq].w = q->w[j];
				units[u].nq++;
			}
		}

		/*
		 * A unit per term and block of GI_SP_QGROUP queries (the pairs of a
		 * term are in query order), so that the scatter can take the
		 * blocks one after the other and a term most queries hold still
		 * spreads over many warps: expanded in place from the end (a unit
		 * never moves below its source).
		 */
		{
			uint32_t	total = 0;
			uint32_t	d;

			for (i = 0; i < nu; i++)
				for (j = units[i].q; j < units[i].q + units[i].nq; j++)
					total += j == units[i].q ||
						pairs[j].q / GI_SP_QGROUP != pairs[j - 1].q / GI_SP_QGROUP;
			d = total;
			for (i = nu; i-- > 0;)
			{
				gi_sp_unit	src = units[i];
				uint32_t	end = src.q + src.nq;

				while (end > src.q)
				{
					uint32_t	blk = pairs[end - 1].q / GI_SP_QGROUP;
					uint32_t	start = end - 1;

					while (start > src.q && pairs[start - 1].q / GI_SP_QGROUP == blk)
						start--;
					d--;
					units[d] = src;
					units[d].q = start;
					units[d].nq = end - start;
					end = start;
				}
			}
			nu = total;
		}
		/* the units in query-block order (stable: terms stay in order within a block) */
		{
			uint32_t	nblk = (n + GI_SP_QGROUP - 1) / GI_SP_QGROUP;
			uint32_t   *at;
			gi_sp_unit *tmp;

			if (!gi_cu_hbuf_reserve(&sp->h_units, (size_t) nu * sizeof(gi_sp_unit) +
									((size_t) nblk + 1) * sizeof(uint32_t)))
			{
				gi_cu_set_error("sparse search: out of memory for %u units", nu);
				return GI_ERR_NOMEM;
			}
			tmp = (gi_sp_unit *) sp->h_units.p;
			at = (uint32_t *) (tmp + nu);
			memset(at, 0, ((size_t) nblk + 1) * sizeof(uint32_t));
			for (i = 0; i < nu; i++)
				at[pairs[units[i].q].q / GI_SP_QGROUP + 1]++;
			for (i = 0; i < nblk; i++)
				at[i + 1] += at[i];
			for (i = 0; i < nu; i++)
				tmp[at[pairs[units[i].q].q / GI_SP_QGROUP]++] = units[i];
			memcpy(units, tmp, (size_t) nu * sizeof(gi_sp_unit));
		}
		b->nterms = 0;
	}
	else
	{
		float	   *qw = (float *) (up + off_qw);
		uint32_t   *pm = (uint32_t *) (up + off_pm);

		/* the union's terms (units) first, then the tables */
		for (i = 0; i < n; i++)
		{
			const gi_sp_query *q = &qv[qa + i];

			for (j = 0; j < q->nnz; j++)
			{
				uint32_t	t = q->terms[j];
				uint32_t	ns = gi_cu_slabdir_count(dir, t);
				bool		added;

				if (ns == 0)
					continue;
				(void) gi_sp_union_add(&un, t, &added);
				if (added)
				{
					units[nu].q = nu;
					units[nu].beg = gi_cu_slabdir_begin(dir, t);
					units[nu].n = ns;
					units[nu].nq = 0;
					nu++;
				}
			}
		}
		memset(qw, 0, (size_t) nu * b->npad * sizeof(float));
		memset(pm, 0, (size_t) nu * groups * sizeof(uint32_t));
		for (i = 0; i < n; i++)
		{
			const gi_sp_query *q = &qv[qa + i];

			for (j = 0; j < q->nnz; j++)
			{
				uint32_t	t = q->terms[j];
				uint32_t	u;
				bool		added;

				if (gi_cu_slabdir_count(dir, t) == 0)
					continue;
				u = gi_sp_union_add(&un, t, &added);
				qw[(size_t) u * b->npad + i] = q->w[j];
				pm[(size_t) u * groups + i / 32] |= 1u << (i % 32);
			}
		}
		b->nterms = nu;
	}
	prefix[0] = 0;
	for (i = 0; i < nu; i++)
		prefix[i + 1] = prefix[i] + (units[i].n + GI_SP_CHUNK - 1) / GI_SP_CHUNK;
	b->nu = nu;
	b->nchunks = prefix[nu];
	/* pack the pairs, or the weights and masks, right behind the union's real size */
	if (!doc)
	{
		size_t		to = gi_sp_align16(off_prefix + ((size_t) nu + 1) * sizeof(uint32_t));

		memmove(up + to, up + off_pairs, (size_t) npairs * sizeof(gi_sp_qw));
		off_pairs = to;
	}
	if (doc)
	{
		size_t		qw_bytes = gi_sp_align16((size_t) nu * b->npad * sizeof(float));

		memmove(up + off_qw + qw_bytes, up + off_pm, (size_t) nu * groups * sizeof(uint32_t));
		off_pm = off_qw + qw_bytes;
		bytes = off_pm + (size_t) nu * groups * sizeof(uint32_t);
	}
	else
		bytes = off_pairs + (size_t) npairs * sizeof(gi_sp_qw);
	GI_CU_TRY(cudaMemcpyAsync(sp->s_up.p, up, bytes, cudaMemcpyHostToDevice, s->ss));
	b->units = (const gi_sp_unit *) sp->s_up.p;
	b->prefix = (const uint32_t *) ((unsigned char *) sp->s_up.p + off_prefix);
	b->pairs = (const gi_sp_qw *) ((unsigned char *) sp->s_up.p + off_pairs);
	b->qw = (const float *) ((unsigned char *) sp->s_up.p + off_qw);
	b->pm = (const uint32_t *) ((unsigned char *) sp->s_up.p + off_pm);
	return GI_OK;
}

/* device scratch for sub-batches of pl->nsub queries */
static gi_status
gi_sp_reserve(gi_cu_sparse *sp, const gi_sp_plan *pl)
{
	size_t		ns = pl->nsub;
	size_t		cand = ns * pl->span;
	size_t		carry = pl->nr > 1 ? ns * pl->nr * pl->kr : 0;
	size_t		fin = ns * pl->kf;
	gi_status	st;

	st = gi_cu_buf_reserve(&sp->s_acc, cand * sizeof(double));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_cd, cand * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_ck, cand * sizeof(uint64_t));
	if (st == GI_OK && carry)
		st = gi_cu_buf_reserve(&sp->s_xd, carry * sizeof(uint32_t));
	if (st == GI_OK && carry)
		st = gi_cu_buf_reserve(&sp->s_xk, carry * sizeof(uint64_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_fd, fin * sizeof(uint32_t) + 4);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_fk, fin * sizeof(uint64_t) + 8);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_hits, fin * sizeof(gi_hit) + 16);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_cnt, 4 * ns * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_pinned_reserve(&sp->p_res, fin * sizeof(gi_hit) + (ns + 4) * sizeof(uint32_t));
	return st;
}

/* score, select and order one sub-batch into sp->s_hits / found counts */
static gi_status
gi_sp_run(gi_store *s, gi_cu_sparse *sp, const gi_sp_plan *pl, const gi_sp_batch *b,
		  uint32_t k, double *t_score, double *t_select)
{
	uint32_t   *cnt = (uint32_t *) sp->s_cnt.p;
	uint32_t   *ccnt = cnt;				/* candidates of the range */
	uint32_t   *xcnt = cnt + pl->nsub;	/* winners of the ranges so far */
	uint32_t   *fcnt = cnt + 2 * (size_t) pl->nsub;	/* selected */
	uint32_t   *found = cnt + 3 * (size_t) pl->nsub;
	double	   *acc = (double *) sp->s_acc.p;
	uint32_t   *cd = (uint32_t *) sp->s_cd.p;
	uint64_t   *ck = (uint64_t *) sp->s_ck.p;
	size_t		xstride = (size_t) pl->nr * pl->kr;
	size_t		fwd_bytes = pl->budget / 4;
	/* a query block's rows beyond half the L2: take its chunks in slab order */
	uint32_t	lo;
	gi_status	st;
	double		t0;

	GI_CU_TRY(cudaMemsetAsync(xcnt, 0, 2 * (size_t) pl->nsub * sizeof(uint32_t), s->ss));
	if (pl->method != GI_SPARSE_DOC)
	{
		st = gi_cu_sp_term_order(s, sp, b->units, b->prefix, b->nu, b->nchunks, b->pairs,
								 b->n, pl->by_slab);
		if (st != GI_OK)
			return st;
	}
	for (lo = 0; lo < pl->H; lo += pl->span)
	{
		uint32_t	rlen = pl->H - lo < pl->span ? pl->H - lo : pl->span;

		t0 = gi_sp_now_ms();
		if (pl->method == GI_SPARSE_DOC)
			st = gi_cu_sp_doc_score(s, sp, b->units, b->prefix, b->nu, b->nchunks, b->qw, b->pm,
									b->npad, b->n, lo, rlen, pl->span, fwd_bytes, acc);
		else
			st = gi_cu_sp_term_score(s, sp, b->units, b->prefix, b->nu, b->nchunks, b->pairs,
									 pl->by_slab, b->n, lo, rlen, pl->span, acc);
		if (st != GI_OK)
			return st;
		if (gi_sp_profiling)
		{
			GI_CU_TRY(cudaStreamSynchronize(s->ss));
			*t_score += gi_sp_now_ms() - t0;
			t0 = gi_sp_now_ms();
		}
		st = gi_cu_sp_compact(s, sp, acc, b->n, lo, rlen, pl->span, k, cd, ck, ccnt);
		if (st == GI_OK && pl->nr == 1)
		{
			bool		done;

			st = gi_cu_sp_order_few(s, sp, b->n, pl->kf, cd, ck, pl->span, ccnt,
									(gi_hit *) sp->s_hits.p, found, &done);
			if (st == GI_OK && done)
			{
				if (gi_sp_profiling)
				{
					GI_CU_TRY(cudaStreamSynchronize(s->ss));
					*t_select += gi_sp_now_ms() - t0;
				}
				return GI_OK;
			}
		}
		if (st == GI_OK && pl->nr == 1)
			st = gi_cu_sp_select(s, sp, b->n, k, cd, ck, pl->span, ccnt, rlen,
								 (uint32_t *) sp->s_fd.p, (uint64_t *) sp->s_fk.p, pl->kf, fcnt);
		else if (st == GI_OK)
			st = gi_cu_sp_select(s, sp, b->n, k, cd, ck, pl->span, ccnt, rlen,
								 (uint32_t *) sp->s_xd.p, (uint64_t *) sp->s_xk.p, xstride, xcnt);
		if (st != GI_OK)
			return st;
		if (gi_sp_profiling)
		{
			GI_CU_TRY(cudaStreamSynchronize(s->ss));
			*t_select += gi_sp_now_ms() - t0;
		}
	}
	t0 = gi_sp_now_ms();
	if (pl->nr > 1)
	{
		st = gi_cu_sp_select(s, sp, b->n, k, (const uint32_t *) sp->s_xd.p,
							 (const uint64_t *) sp->s_xk.p, xstride, xcnt, (uint32_t) xstride,
							 (uint32_t *) sp->s_fd.p, (uint64_t *) sp->s_fk.p, pl->kf, fcnt);
		if (st != GI_OK)
			return st;
	}
	st = gi_cu_sp_order(s, sp, b->n, pl->kf, (uint32_t *) sp->s_fd.p, (uint64_t *) sp->s_fk.p,
						fcnt, (gi_hit *) sp->s_hits.p, found);
	if (st == GI_OK && gi_sp_profiling)
	{
		GI_CU_TRY(cudaStreamSynchronize(s->ss));
		*t_select += gi_sp_now_ms() - t0;
	}
	return st;
}

/* query q's k hits: the device's found ones, then padding (key 0, +Inf) */
static void
gi_sp_write_hits(gi_hit *out, uint32_t k, const gi_hit *got, uint32_t found)
{
	uint32_t	r;

	if (found)
		memcpy(out, got, (size_t) found * sizeof(gi_hit));
	for (r = found; r < k; r++)
	{
		out[r].key = 0;
		out[r].distance = __builtin_inff();
		out[r].pad = 0;
	}
}

/* ---- the counting path ------------------------------------------------------- */

/*
 * Can the batch be counted: every query weight a whole number from 1, a
 * query's weights summing to at most GI_SP_COUNT_MAX (*maxc: the largest
 * sum), and every record of the terms' lists weighing 1?
 */
static bool
gi_sp_countable(const gi_cu_sparse *sp, const gi_sp_query *qv, uint32_t nq, uint32_t *maxc)
{
	uint32_t	most = 0;

	if (sp->unit == NULL)
		return false;
	for (uint32_t q = 0; q < nq; q++)
	{
		uint32_t	sum = gi_sparse_count_sum(sp->unit, qv[q].nnz, qv[q].terms,
											  qv[q].w, GI_SP_COUNT_MAX);

		if (sum == 0 && qv[q].nnz > 0)
			return false;
		if (sum > most)
			most = sum;
	}
	*maxc = most;
	return true;
}

/* queries per sub-batch and the scratch of the counting path */
static gi_status
gi_sp_count_plan(gi_cu_sparse *sp, gi_sp_plan *pl, uint32_t nq)
{
	size_t		per;
	size_t		n;
	size_t		ns;
	gi_status	st;

	pl->span = pl->H;
	pl->nr = 1;
	pl->kr = pl->kf;
	pl->by_slab = false;
	pl->cap = pl->H < GI_SP_COUNT_CAND ? pl->H :
		(pl->kf > GI_SP_COUNT_CAND ? pl->kf : GI_SP_COUNT_CAND);
	per = gi_sp_count_words(pl->H, pl->maxc) * sizeof(uint32_t) +
		((size_t) pl->maxc + 1) * sizeof(uint32_t) +
		(size_t) pl->cap * (sizeof(uint32_t) + sizeof(uint64_t)) +
		(size_t) pl->kf * (sizeof(uint32_t) + sizeof(uint64_t) + sizeof(gi_hit)) +
		GI_SP_BINS * sizeof(uint32_t) + sizeof(gi_sp_sel) + 64;
	if (pl->kf > 4096)
		per += (size_t) pl->kf * (sizeof(uint32_t) + sizeof(uint64_t)) * 2;
	n = pl->budget / per;
	if (n < 1)
		n = 1;
	if (n > nq)
		n = nq;
	if (n > 65535)
		n = 65535;
	pl->nsub = (uint32_t) n;
	ns = n;
	st = gi_cu_buf_reserve(&sp->s_cd, ns * pl->cap * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_ck, ns * pl->cap * sizeof(uint64_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_fd, ns * pl->kf * sizeof(uint32_t) + 4);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_fk, ns * pl->kf * sizeof(uint64_t) + 8);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_hits, ns * pl->kf * sizeof(gi_hit) + 16);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_cnt, 4 * ns * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_pinned_reserve(&sp->p_res, ns * pl->kf * sizeof(gi_hit) +
								  (2 * ns + 4) * sizeof(uint32_t));
	return st;
}

/* count, select and order one sub-batch into sp->s_hits; *over: device flags per query */
static gi_status
gi_sp_run_count(gi_store *s, gi_cu_sparse *sp, const gi_sp_plan *pl, const gi_sp_batch *b,
				uint32_t k, uint32_t **over, double *t_score, double *t_select)
{
	uint32_t   *cnt = (uint32_t *) sp->s_cnt.p;
	uint32_t   *fcnt = cnt + 2 * (size_t) pl->nsub;
	uint32_t   *found = cnt + 3 * (size_t) pl->nsub;
	double		t0 = gi_sp_now_ms();
	gi_status	st;

	GI_CU_TRY(cudaMemsetAsync(fcnt, 0, (size_t) pl->nsub * sizeof(uint32_t), s->ss));
	st = gi_cu_sp_count(s, sp, b->units, b->prefix, b->nu, b->nchunks, b->pairs, b->n, pl->H,
						pl->maxc, k, pl->cap, pl->band, (uint32_t *) sp->s_cd.p,
						(uint64_t *) sp->s_ck.p, cnt, over);
	if (st != GI_OK)
		return st;
	if (gi_sp_profiling)
	{
		GI_CU_TRY(cudaStreamSynchronize(s->ss));
		*t_score += gi_sp_now_ms() - t0;
		t0 = gi_sp_now_ms();
	}
	st = gi_cu_sp_select(s, sp, b->n, k, (const uint32_t *) sp->s_cd.p,
						 (const uint64_t *) sp->s_ck.p, pl->cap, cnt, pl->cap,
						 (uint32_t *) sp->s_fd.p, (uint64_t *) sp->s_fk.p, pl->kf, fcnt);
	if (st == GI_OK)
		st = gi_cu_sp_order(s, sp, b->n, pl->kf, (uint32_t *) sp->s_fd.p, (uint64_t *) sp->s_fk.p,
							fcnt, (gi_hit *) sp->s_hits.p, found);
	if (st == GI_OK && gi_sp_profiling)
	{
		GI_CU_TRY(cudaStreamSynchronize(s->ss));
		*t_select += gi_sp_now_ms() - t0;
	}
	return st;
}

/*
 * Every sub-batch of qv[0..nq) under plan pl: query i's hits go to
 * hits[map[i] * k ...] and found[map[i]] (no map: i).  On the counting
 * path over[i] says whether query i's candidates overflowed; its hits are
 * then not written.
 */
static gi_status
gi_sp_search_batches(gi_store *s, gi_cu_sparse *sp, const gi_sp_plan *pl, const gi_sp_query *qv,
					 uint32_t nq, uint32_t k, gi_hit *hits, uint32_t *found, const uint32_t *map,
					 uint8_t *over, double *t_score, double *t_select, uint32_t *nbatches)
{
	const bool count = pl->method == GI_SPARSE_COUNT;
	uint32_t	flags = 0;
	gi_status	st;

	for (uint32_t qa = 0; qa < nq;)
	{
		gi_sp_batch b;
		char	   *res = (char *) sp->p_res.p;
		size_t		hbytes;
		size_t		fbytes;
		uint32_t   *dover = NULL;

		memset(&b, 0, sizeof(b));
		st = gi_sp_prepare(s, sp, pl, qv, nq, qa, &b);
		if (st == GI_OK)
			st = count ? gi_sp_run_count(s, sp, pl, &b, k, &dover, t_score, t_select) :
				gi_sp_run(s, sp, pl, &b, k, t_score, t_select);
		if (st != GI_OK)
			return st;
		hbytes = (size_t) b.n * pl->kf * sizeof(gi_hit);
		fbytes = (size_t) b.n * sizeof(uint32_t);
		GI_CU_TRY(cudaMemcpyAsync(res, sp->s_hits.p, hbytes, cudaMemcpyDeviceToHost, s->ss));
		GI_CU_TRY(cudaMemcpyAsync(res + hbytes, (uint32_t *) sp->s_cnt.p + 3 * (size_t) pl->nsub,
								  fbytes, cudaMemcpyDeviceToHost, s->ss));
		GI_CU_TRY(cudaMemcpyAsync(res + hbytes + fbytes, s->d_flags + 1,
								  sizeof(uint32_t), cudaMemcpyDeviceToHost, s->ss));
		if (count)
			GI_CU_TRY(cudaMemcpyAsync(res + hbytes + fbytes + sizeof(uint32_t), dover, fbytes,
									  cudaMemcpyDeviceToHost, s->ss));
		GI_CU_TRY(cudaStreamSynchronize(s->ss));
		memcpy(&flags, res + hbytes + fbytes, sizeof(uint32_t));
		if (flags & GI_CU_FLAG_DIR)
		{
			gi_cu_set_error("CUDA store inconsistent: a linked slab names a list out of range");
			return GI_ERR_DEVICE;
		}
		for (uint32_t i = 0; i < b.n; i++)
		{
			uint32_t	f;
			uint32_t	o = 0;
			uint32_t	to = map ? map[qa + i] : qa + i;

			memcpy(&f, res + hbytes + (size_t) i * sizeof(uint32_t), sizeof(uint32_t));
			if (count)
			{
				memcpy(&o, res + hbytes + fbytes + sizeof(uint32_t) + (size_t) i * sizeof(uint32_t),
					   sizeof(uint32_t));
				over[qa + i] = o != 0;
				if (o)
					continue;
			}
			if (f > pl->kf)
			{
				gi_cu_set_error("sparse search: %u hits selected for k = %u", f, pl->kf);
				return GI_ERR_DEVICE;
			}
			found[to] = f;
			gi_sp_write_hits(hits + (size_t) to * k, k,
							 (const gi_hit *) (res + (size_t) i * pl->kf * sizeof(gi_hit)), f);
		}
		qa += b.n;
		(*nbatches)++;
	}
	return GI_OK;
}

static gi_status
gi_cu_sparse_search(gi_store *s, const void *params, uint32_t nq, const void *queries,
					size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	const gi_sparse_search_params *p = (const gi_sparse_search_params *) params;
	gi_cu_sparse *sp;
	gi_sp_query *qv;
	gi_sp_plan	pl;
	gi_sp_union un;
	uint64_t	p_term = 0;
	uint64_t	p_union = 0;
	uint32_t	nbatches = 0;
	uint32_t	q;
	uint32_t	j;
	double		t_start = gi_sp_now_ms();
	double		t_dir = 0.0;
	double		t_score = 0.0;
	double		t_select = 0.0;
	gi_status	st;

	if (s == NULL || p == NULL)
	{
		gi_cu_set_error("sparse search: no store or no parameters");
		return GI_ERR_INVALID;
	}
	sp = (gi_cu_sparse *) gi_cu_kstate(s, GI_KIND_SPARSE);
	if (sp == NULL)
	{
		gi_cu_set_error("sparse search: the store has no state (set_state was not called)");
		return GI_ERR_INVALID;
	}
	if (p->dim != sp->dim)
	{
		gi_cu_set_error("sparse search: queries of %u dimensions for an index of %u",
						p->dim, sp->dim);
		return GI_ERR_INVALID;
	}
	if (nq == 0)
		return GI_OK;
	if (queries == NULL || found == NULL || (k > 0 && hits == NULL))
	{
		gi_cu_set_error("sparse search: queries, hits and found must not be NULL");
		return GI_ERR_INVALID;
	}
	if (!gi_cu_hbuf_reserve(&sp->h_q, (size_t) nq * sizeof(gi_sp_query)))
	{
		gi_cu_set_error("sparse search: out of memory for %u queries", nq);
		return GI_ERR_NOMEM;
	}
	qv = (gi_sp_query *) sp->h_q.p;
	st = gi_sp_parse(queries, query_bytes, nq, sp->dim, qv);
	if (st != GI_OK)
		return st;
	if (k == 0)
	{
		memset(found, 0, (size_t) nq * sizeof(uint32_t));
		return GI_OK;
	}
	st = gi_cu_store_enter(s);
	if (st != GI_OK)
		return st;

	/* a concurrent pool growth waits until this search is over */
	std::lock_guard<std::mutex> guard(s->mu);

	memset(&pl, 0, sizeof(pl));
	memset(sp->prof, 0, sizeof(sp->prof));
	pl.method = p->method == GI_SPARSE_DOC ? GI_SPARSE_DOC : GI_SPARSE_TERM;
	sp->prof[0] = pl.method;
	pl.H = s->kid_hwm;
	if (pl.H == 0)
	{
		for (q = 0; q < nq; q++)
		{
			gi_sp_write_hits(hits + (size_t) q * k, k, NULL, 0);
			found[q] = 0;
		}
		return GI_OK;
	}
	GI_CU_TRY(cudaMemsetAsync(s->d_flags + 1, 0, sizeof(uint32_t), s->ss));
	st = gi_cu_slabdir_update(s, &sp->dir, s->ss);
	if (st != GI_OK)
		return st;
	t_dir = gi_sp_now_ms() - t_start;

	/* the postings each path would read, for the chooser and the profile */
	{
		uint64_t	nnz = 0;

		for (q = 0; q < nq; q++)
			nnz += qv[q].nnz;
		if (!gi_sp_union_init(&sp->h_hash, &un, nnz))
		{
			gi_cu_set_error("sparse search: out of memory for the union of %llu terms",
							(unsigned long long) nnz);
			return GI_ERR_NOMEM;
		}
		for (q = 0; q < nq; q++)
			for (j = 0; j < qv[q].nnz; j++)
			{
				uint32_t	t = qv[q].terms[j];
				bool		added;

				qv[q].postings += s->list_rows[t];
				(void) gi_sp_union_add(&un, t, &added);
				if (added)
					p_union += s->list_rows[t];
			}
		for (q = 0; q < nq; q++)
			p_term += qv[q].postings;
	}
	if ((p->method == GI_SPARSE_COUNT || p->method == GI_SPARSE_AUTO) &&
		gi_sp_countable(sp, qv, nq, &pl.maxc))
	{
		uint8_t    *over;
		uint32_t   *map;
		gi_sp_query *rest;
		uint32_t	nrest = 0;

		/* counted, then the queries whose ties overflowed by the term path */
		pl.method = GI_SPARSE_COUNT;
		pl.kf = k < pl.H ? k : pl.H;
		pl.budget = gi_sp_budget();
		st = gi_sp_count_plan(sp, &pl, nq);
		if (st == GI_OK && gi_sp_tiles != 0)
			st = gi_cu_sp_bands_update(s, sp);
		if (st != GI_OK)
			return st;
		if (gi_sp_tiles == 1 ||
			(gi_sp_tiles < 0 && sp->b_reads[gi_sp_count_bits(pl.maxc) == 16] <= GI_SP_TILE_READS_MAX))
			pl.band = gi_sp_tile_band ? gi_sp_tile_band : gi_sp_band_ords(gi_sp_count_bits(pl.maxc));
		sp->prof[10] = pl.band;
		over = (uint8_t *) calloc(nq, 1);
		if (over == NULL)
		{
			gi_cu_set_error("sparse search: out of memory for %u queries", nq);
			return GI_ERR_NOMEM;
		}
		st = gi_sp_search_batches(s, sp, &pl, qv, nq, k, hits, found, NULL, over, &t_score,
								  &t_select, &nbatches);
		for (q = 0; st == GI_OK && q < nq; q++)
			nrest += over[q];
		if (st == GI_OK && nrest > 0)
		{
			gi_sp_plan	tp = pl;

			rest = (gi_sp_query *) malloc((size_t) nrest * sizeof(gi_sp_query));
			map = (uint32_t *) malloc((size_t) nrest * sizeof(uint32_t));
			if (rest == NULL || map == NULL)
			{
				gi_cu_set_error("sparse search: out of memory for %u queries", nrest);
				st = GI_ERR_NOMEM;
			}
			else
			{
				nrest = 0;
				for (q = 0; q < nq; q++)
					if (over[q])
					{
						rest[nrest] = qv[q];
						map[nrest++] = q;
					}
				tp.method = GI_SPARSE_TERM;
				gi_sp_plan_sizes(&tp, nrest);
				tp.by_slab = gi_sp_slab_order >= 0 ? gi_sp_slab_order == 1 :
					(size_t) GI_SP_QGROUP * tp.span * sizeof(double) > s->dev->l2_bytes / 2;
				st = gi_sp_reserve(sp, &tp);
				if (st == GI_OK)
					st = gi_sp_search_batches(s, sp, &tp, rest, nrest, k, hits, found, map, NULL,
											  &t_score, &t_select, &nbatches);
			}
			free(rest);
			free(map);
			sp->prof[9] = nrest;
		}
		free(over);
		if (st != GI_OK)
			return st;
	}
	else
	{
		if (p->method != GI_SPARSE_TERM && p->method != GI_SPARSE_DOC)
			pl.method = gi_sp_choose(p_term, p_union, nq);
		pl.kf = k < pl.H ? k : pl.H;
		pl.budget = gi_sp_budget();
		gi_sp_plan_sizes(&pl, nq);
		/* a query block's rows beyond half the L2: group by term, take chunks in slab order */
		pl.by_slab = gi_sp_slab_order >= 0 ? gi_sp_slab_order == 1 :
			(size_t) GI_SP_QGROUP * pl.span * sizeof(double) > s->dev->l2_bytes / 2;
		st = gi_sp_reserve(sp, &pl);
		if (st == GI_OK)
			st = gi_sp_search_batches(s, sp, &pl, qv, nq, k, hits, found, NULL, NULL, &t_score,
									  &t_select, &nbatches);
		if (st != GI_OK)
			return st;
	}
	sp->prof[0] = pl.method;
	sp->prof[1] = nbatches;
	sp->prof[2] = pl.nr;
	sp->prof[3] = (double) p_term;
	sp->prof[4] = (double) p_union;
	sp->prof[5] = t_dir;
	sp->prof[6] = t_score;
	sp->prof[7] = t_select;
	sp->prof[8] = gi_sp_now_ms() - t_start;
	return GI_OK;
}

extern "C" gi_status
gi_cuda_sparse_profile(gi_store *s, int on, double *out, uint32_t nout)
{
	gi_cu_sparse *sp;
	uint32_t	i;

	if (on >= 0)
		gi_sp_profiling = on;
	if (s == NULL || (sp = (gi_cu_sparse *) gi_cu_kstate(s, GI_KIND_SPARSE)) == NULL)
	{
		gi_cu_set_error("sparse profile: no store or no sparse state");
		return GI_ERR_INVALID;
	}
	for (i = 0; out != NULL && i < nout && i < GI_CUDA_SPARSE_PROFILE_N; i++)
		out[i] = sp->prof[i];
	return GI_OK;
}

const gi_kind_ops gi_cu_sparse_kind = {
	gi_cu_sparse_set_state,
	gi_cu_sparse_search,
	gi_cu_sparse_inserted,
	gi_cu_sparse_list_bounds,
};
