/*
 * genie_lsh.c
 *		The LSH operator classes of genie: a real[] vector is the set of its
 *		m hash values, E2LSH for the L2 distance (genie_e2lsh_ops) or random
 *		binning for the Laplacian kernel (genie_rbin_ops), each re-hashed
 *		into its function's own d lists (genie_keywords.h).
 *
 * The count of functions on which a row and a query agree estimates their
 * collision probability, a decreasing function of their distance: GENIE's
 * tau-ANN model.  m, d, the width and the seed are options of the operator
 * class; a query (type genie_lsh_query, made by genie_e2lsh() or
 * genie_rbin()) carries its own, and the index refuses a query whose
 * parameters are not its own.  The functions' random parameters are drawn
 * from the seed, once per backend and dimension.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/reloptions.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "genie.h"
#include "genie_keywords.h"
#include "genie_tau.h"
#include "vecarray.h"

PG_FUNCTION_INFO_V1(genie_lsh_query_in);
PG_FUNCTION_INFO_V1(genie_lsh_query_out);
PG_FUNCTION_INFO_V1(genie_e2lsh_query);
PG_FUNCTION_INFO_V1(genie_rbin_query);
PG_FUNCTION_INFO_V1(genie_e2lsh_options);
PG_FUNCTION_INFO_V1(genie_rbin_options);
PG_FUNCTION_INFO_V1(genie_e2lsh_keywords_proc);
PG_FUNCTION_INFO_V1(genie_rbin_keywords_proc);
PG_FUNCTION_INFO_V1(genie_e2lsh_query_proc);
PG_FUNCTION_INFO_V1(genie_rbin_query_proc);
PG_FUNCTION_INFO_V1(genie_lsh_distance);
PG_FUNCTION_INFO_V1(genie_lsh_functions);

static const char *const family_name[] = {NULL, "e2lsh", "rbin"};
static const char *const width_name[] = {NULL, "w", "sigma"};

typedef struct LshOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		m;
	int32		d;
	int32		seed;
	double		width;
} LshOptions;

/* the functions' random parameters for one (params, dimension) */
typedef struct LshCache
{
	GenieLshParams p;
	int32		dim;
	float	   *params;
	/* the last query's keywords, for the operator */
	GenieLshQuery *query;
	uint32	   *qkeys;
} LshCache;

#define PG_GETARG_LSH_QUERY_P(x) ((GenieLshQuery *) PG_DETOAST_DATUM(PG_GETARG_DATUM(x)))

static void
check_params(const GenieLshParams *p)
{
	if (p->m < 1 || p->m > GENIE_LSH_MAX_M)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("m must be between 1 and %d, not %d", GENIE_LSH_MAX_M, p->m)));
	if (p->d < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("d must be at least 1, not %d", p->d)));
	if ((uint64) p->m * (uint64) p->d > (UINT64CONST(1) << 32))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("m times d must be at most 2^32, not %d * %d", p->m, p->d)));
	if (!(p->width > 0.0f) || isinf(p->width))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive finite number", width_name[p->family])));
	if (p->seed < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seed must not be negative")));
}

static GenieLshQuery *
make_query(const GenieLshParams *p, ArrayType *arr)
{
	int			dim;
	const float4 *v = gi_array_floats(arr, &dim, "an LSH query vector");
	GenieLshQuery *q;
	Size		size = offsetof(GenieLshQuery, v) + sizeof(float4) * dim;

	check_params(p);
	q = palloc0(size);
	SET_VARSIZE(q, size);
	q->p = *p;
	q->dim = dim;
	memcpy(q->v, v, sizeof(float4) * dim);
	return q;
}

static char *
f4(float4 x)
{
	return DatumGetCString(DirectFunctionCall1(float4out, Float4GetDatum(x)));
}

/*
 * Text form: family(m=M, d=D, w=W, seed=S) {v1,v2,...}, with sigma in
 * place of w for rbin.
 */
Datum
genie_lsh_query_in(PG_FUNCTION_ARGS)
{
	char	   *lit = PG_GETARG_CSTRING(0);
	char		fam[8];
	char		wname[8];
	GenieLshParams p;
	int			used = -1;
	Datum		arr;

	memset(&p, 0, sizeof(p));
	if (sscanf(lit, " %7[a-z0-9] ( m = %d , d = %d , %7[a-z] = %f , seed = %d ) %n",
			   fam, &p.m, &p.d, wname, &p.width, &p.seed, &used) != 6 || used < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type genie_lsh_query: \"%s\"", lit),
				 errdetail("The form is e2lsh(m=64, d=1024, w=4, seed=0) {1,2,3} or rbin(m=64, d=1024, sigma=1, seed=0) {1,2,3}.")));
	for (p.family = GENIE_LSH_E2LSH; p.family <= GENIE_LSH_RBIN; p.family++)
		if (strcmp(fam, family_name[p.family]) == 0)
			break;
	if (p.family > GENIE_LSH_RBIN || strcmp(wname, width_name[p.family]) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type genie_lsh_query: \"%s\"", lit),
				 errdetail("The families are e2lsh (with w) and rbin (with sigma).")));
	arr = OidInputFunctionCall(F_ARRAY_IN, lit + used, FLOAT4OID, -1);
	PG_RETURN_POINTER(make_query(&p, DatumGetArrayTypeP(arr)));
}

Datum
genie_lsh_query_out(PG_FUNCTION_ARGS)
{
	GenieLshQuery *q = PG_GETARG_LSH_QUERY_P(0);
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfo(&s, "%s(m=%d, d=%d, %s=%s, seed=%d) {", family_name[q->p.family],
					 q->p.m, q->p.d, width_name[q->p.family],
					 f4(q->p.width), q->p.seed);
	for (int i = 0; i < q->dim; i++)
		appendStringInfo(&s, "%s%s", i ? "," : "", f4(q->v[i]));
	appendStringInfoChar(&s, '}');
	PG_RETURN_CSTRING(s.data);
}

static Datum
query_of_args(FunctionCallInfo fcinfo, int family)
{
	GenieLshParams p;

	p.family = family;
	p.m = PG_GETARG_INT32(1);
	p.width = PG_GETARG_FLOAT4(2);
	p.d = PG_GETARG_INT32(3);
	p.seed = PG_GETARG_INT32(4);
	PG_RETURN_POINTER(make_query(&p, PG_GETARG_ARRAYTYPE_P(0)));
}

/* genie_e2lsh(v, m, w, d, seed) */
Datum
genie_e2lsh_query(PG_FUNCTION_ARGS)
{
	return query_of_args(fcinfo, GENIE_LSH_E2LSH);
}

/* genie_rbin(v, m, sigma, d, seed) */
Datum
genie_rbin_query(PG_FUNCTION_ARGS)
{
	return query_of_args(fcinfo, GENIE_LSH_RBIN);
}

static void
validate_options(void *parsed, relopt_value *vals, int nvals)
{
	LshOptions *o = parsed;

	if ((uint64) o->m * (uint64) o->d > (UINT64CONST(1) << 32))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("m times d must be at most 2^32, not %d * %d", o->m, o->d)));
}

static void
add_options(local_relopts *relopts, const char *width, const char *desc,
			double width_default)
{
	init_local_reloptions(relopts, sizeof(LshOptions));
	add_local_int_reloption(relopts, "m", "hash functions", GENIE_LSH_DEFAULT_M,
							1, GENIE_LSH_MAX_M, offsetof(LshOptions, m));
	add_local_int_reloption(relopts, "d", "lists of each hash function",
							GENIE_LSH_DEFAULT_D, 1, GENIE_LSH_MAX_D,
							offsetof(LshOptions, d));
	add_local_int_reloption(relopts, "seed", "seed of the random functions", 0,
							0, PG_INT32_MAX, offsetof(LshOptions, seed));
	add_local_real_reloption(relopts, width, desc, width_default, 1e-30, 1e30,
							 offsetof(LshOptions, width));
	register_reloptions_validator(relopts, validate_options);
}

/* support function 3 of genie_e2lsh_ops: m, d, w, seed */
Datum
genie_e2lsh_options(PG_FUNCTION_ARGS)
{
	add_options((local_relopts *) PG_GETARG_POINTER(0), "w", "bucket width",
				GENIE_LSH_DEFAULT_W);
	PG_RETURN_VOID();
}

/* support function 3 of genie_rbin_ops: m, d, sigma, seed */
Datum
genie_rbin_options(PG_FUNCTION_ARGS)
{
	add_options((local_relopts *) PG_GETARG_POINTER(0), "sigma",
				"kernel width of exp(-|x - y|_1 / sigma)", GENIE_LSH_DEFAULT_SIGMA);
	PG_RETURN_VOID();
}

static GenieLshParams
index_params(FunctionCallInfo fcinfo, int family)
{
	GenieLshParams p;
	LshOptions *o = PG_HAS_OPCLASS_OPTIONS() ? (LshOptions *) PG_GET_OPCLASS_OPTIONS() : NULL;

	p.family = family;
	p.m = o ? o->m : GENIE_LSH_DEFAULT_M;
	p.d = o ? o->d : GENIE_LSH_DEFAULT_D;
	p.seed = o ? o->seed : 0;
	p.width = (float4) (o ? o->width :
						family == GENIE_LSH_E2LSH ? GENIE_LSH_DEFAULT_W : GENIE_LSH_DEFAULT_SIGMA);
	return p;
}

static bool
same_params(const GenieLshParams *a, const GenieLshParams *b)
{
	return a->family == b->family && a->m == b->m && a->d == b->d &&
		a->seed == b->seed && a->width == b->width;
}

/* the cached random parameters of p at dimension dim */
static LshCache *
cache_for(FmgrInfo *flinfo, const GenieLshParams *p, int dim)
{
	LshCache   *c = flinfo->fn_extra;
	size_t		n;

	if (c == NULL)
	{
		c = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(LshCache));
		flinfo->fn_extra = c;
	}
	if (c->params != NULL && c->dim == dim && same_params(&c->p, p))
		return c;
	if (c->params)
		pfree(c->params);
	c->params = NULL;
	n = p->family == GENIE_LSH_E2LSH ? genie_e2lsh_params_size(dim, p->m)
		: genie_rbin_params_size(dim, p->m);
	if (n > MaxAllocHugeSize / sizeof(float))
		elog(ERROR, "LSH parameters too large");
	c->params = MemoryContextAllocHuge(flinfo->fn_mcxt, n * sizeof(float));
	if (p->family == GENIE_LSH_E2LSH)
		genie_e2lsh_init(c->params, dim, p->m, p->width, (uint64) p->seed);
	else
		genie_rbin_init(c->params, dim, p->m, p->width, (uint64) p->seed);
	c->p = *p;
	c->dim = dim;
	return c;
}

/* the m keywords (i * d + hash, increasing in i) of v */
static void
lsh_keywords(const LshCache *c, const float4 *v, uint32 *out)
{
	if (c->p.family == GENIE_LSH_E2LSH)
		genie_e2lsh(c->params, v, c->dim, c->p.m, c->p.width, c->p.d, out);
	else
		genie_rbin(c->params, v, c->dim, c->p.m, c->p.d, out);
}

/* the keywords of v as 64-bit keys */
static uint64 *
lsh_keys(const LshCache *c, const float4 *v)
{
	uint32	   *h = palloc(sizeof(uint32) * c->p.m);
	uint64	   *keys = palloc(sizeof(uint64) * c->p.m);

	lsh_keywords(c, v, h);
	for (int i = 0; i < c->p.m; i++)
		keys[i] = h[i];
	pfree(h);
	return keys;
}

static uint64 *
row_keywords(FunctionCallInfo fcinfo, const GenieLshParams *p, uint32 *nkeys)
{
	int			dim;
	const float4 *v = gi_array_floats(PG_GETARG_ARRAYTYPE_P(0), &dim, "a genie LSH vector");

	*nkeys = (uint32) p->m;
	return lsh_keys(cache_for(fcinfo->flinfo, p, dim), v);
}

/* support function 1: (real[], internal nkeys) */
Datum
genie_e2lsh_keywords_proc(PG_FUNCTION_ARGS)
{
	GenieLshParams p = index_params(fcinfo, GENIE_LSH_E2LSH);

	check_params(&p);
	PG_RETURN_POINTER(row_keywords(fcinfo, &p, (uint32 *) PG_GETARG_POINTER(1)));
}

Datum
genie_rbin_keywords_proc(PG_FUNCTION_ARGS)
{
	GenieLshParams p = index_params(fcinfo, GENIE_LSH_RBIN);

	check_params(&p);
	PG_RETURN_POINTER(row_keywords(fcinfo, &p, (uint32 *) PG_GETARG_POINTER(1)));
}

/* the parameters of an index of an LSH class; false for other genie indexes */
static bool
lsh_index_params(Relation index, GenieLshParams *p)
{
	PGFunction	f = index_getprocinfo(index, 1, GENIE_KEYWORDS_PROC)->fn_addr;
	bytea	  **opts;
	LshOptions *o;

	if (f == genie_e2lsh_keywords_proc)
		p->family = GENIE_LSH_E2LSH;
	else if (f == genie_rbin_keywords_proc)
		p->family = GENIE_LSH_RBIN;
	else
		return false;
	opts = RelationGetIndexAttOptions(index, false);
	o = opts != NULL ? (LshOptions *) opts[0] : NULL;
	p->m = o ? o->m : GENIE_LSH_DEFAULT_M;
	p->d = o ? o->d : GENIE_LSH_DEFAULT_D;
	p->seed = o ? o->seed : 0;
	p->width = (float4) (o ? o->width : p->family == GENIE_LSH_E2LSH ?
						 GENIE_LSH_DEFAULT_W : GENIE_LSH_DEFAULT_SIGMA);
	return true;
}

/* can an LSH index of a genie class answer this query?  (true for other classes) */
bool
genie_lsh_query_fits(Relation index, Datum query)
{
	GenieLshParams p;

	if (!lsh_index_params(index, &p))
		return true;
	return same_params(&((GenieLshQuery *) DatumGetPointer(PG_DETOAST_DATUM(query)))->p, &p);
}

/*
 * Is an LSH index's count the operator's?  When no two of its m * d
 * function values share a list: each query keyword is then its own list,
 * the row has one keyword per function, and the inner product counts the
 * functions they agree on.
 */
bool
genie_lsh_index_exact(Relation index, uint32 lists)
{
	GenieLshParams p;

	return lsh_index_params(index, &p) && (uint64) p.m * (uint64) p.d <= (uint64) lists;
}

/* support function 2: (genie_lsh_query, internal nitems, int2), its params the index's */
static Datum
query_items(FunctionCallInfo fcinfo, int family)
{
	GenieLshParams p = index_params(fcinfo, family);
	GenieLshQuery *q = PG_GETARG_LSH_QUERY_P(0);
	uint32	   *nitems = (uint32 *) PG_GETARG_POINTER(1);
	uint64	   *keys;

	if (!same_params(&q->p, &p))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query hashes with %s(m=%d, d=%d, %s=%g, seed=%d), the index with %s(m=%d, d=%d, %s=%g, seed=%d)",
						family_name[q->p.family], q->p.m, q->p.d,
						width_name[q->p.family], q->p.width, q->p.seed,
						family_name[p.family], p.m, p.d, width_name[p.family],
						p.width, p.seed),
				 errhint("Order by col <~> genie_%s(vector, %d, %g, %d, %d).",
						 family_name[p.family], p.m, p.width, p.d, p.seed)));
	keys = lsh_keys(cache_for(fcinfo->flinfo, &p, q->dim), q->v);
	*nitems = (uint32) p.m;
	PG_RETURN_POINTER(genie_items_of_keys(keys, *nitems));
}

Datum
genie_e2lsh_query_proc(PG_FUNCTION_ARGS)
{
	return query_items(fcinfo, GENIE_LSH_E2LSH);
}

Datum
genie_rbin_query_proc(PG_FUNCTION_ARGS)
{
	return query_items(fcinfo, GENIE_LSH_RBIN);
}

/*
 * real[] <~> genie_lsh_query: minus the number of the query's m functions
 * on which the two vectors agree, with the query's parameters.
 */
Datum
genie_lsh_distance(PG_FUNCTION_ARGS)
{
	int			dim;
	const float4 *v = gi_array_floats(PG_GETARG_ARRAYTYPE_P(0), &dim, "a genie LSH vector");
	GenieLshQuery *q = PG_GETARG_LSH_QUERY_P(1);
	LshCache   *c;
	uint32	   *h;
	int			count = 0;

	gi_check_same_dim(dim, q->dim);
	c = cache_for(fcinfo->flinfo, &q->p, dim);
	if (c->query == NULL || VARSIZE(c->query) != VARSIZE(q) ||
		memcmp(c->query, q, VARSIZE(q)) != 0)
	{
		if (c->query)
		{
			pfree(c->query);
			pfree(c->qkeys);
		}
		c->query = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, VARSIZE(q));
		memcpy(c->query, q, VARSIZE(q));
		c->qkeys = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(uint32) * q->p.m);
		lsh_keywords(c, q->v, c->qkeys);
	}
	h = palloc(sizeof(uint32) * q->p.m);
	lsh_keywords(c, v, h);
	for (int i = 0; i < q->p.m; i++)
		count += (h[i] == c->qkeys[i]);
	pfree(h);
	PG_RETURN_FLOAT8(-(double) count);
}

/*
 * genie_lsh_functions(epsilon, delta): the number of hash functions m from
 * GENIE's bound, and the smallest m at which every row's count is within
 * epsilon * m of its mean with probability 1 - delta (genie_tau.h).
 */
Datum
genie_lsh_functions(PG_FUNCTION_ARGS)
{
	float8		epsilon = PG_GETARG_FLOAT8(0);
	float8		delta = PG_GETARG_FLOAT8(1);
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	uint32		bound;

	if (!(epsilon >= GENIE_TAU_MIN_EPSILON && epsilon < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epsilon must be at least %g and below 1", GENIE_TAU_MIN_EPSILON)));
	if (!(delta >= GENIE_TAU_MIN_DELTA && delta < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delta must be at least %g and below 1", GENIE_TAU_MIN_DELTA)));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "genie_lsh_functions must return a row");
	bound = genie_tau_bound(epsilon, delta);
	values[0] = Int32GetDatum((int32) bound);
	values[1] = Int32GetDatum((int32) genie_tau_binomial(epsilon, delta, bound));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
