/*
 * spvec_ops.c
 *		The spvec helpers the access methods share (allocation, the
 *		dimension check, the inner product) and the SQL-callable distance
 *		functions on (spvec, spvec).
 *
 * Both vectors keep their indices strictly ascending, so every binary
 * function is one merge of the two index lists: O(nnz(a) + nnz(b)).
 * Sums are taken in double and in ascending index order, which is also the
 * order a dense real[] of the same vector is summed in; with the products
 * of float4 values exact in double, the results equal those of the real[]
 * operators on the dense forms (the inner product then rounded to float4).
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "utils/memutils.h"

#include "spvec.h"

PG_FUNCTION_INFO_V1(spvec_inner_product_sql);
PG_FUNCTION_INFO_V1(spvec_negative_inner_product);
PG_FUNCTION_INFO_V1(spvec_cosine_distance);
PG_FUNCTION_INFO_V1(spvec_l2_distance);
PG_FUNCTION_INFO_V1(spvec_l2_norm);
PG_FUNCTION_INFO_V1(spvec_nnz);
PG_FUNCTION_INFO_V1(spvec_dims);

SpVec *
spvec_alloc(int dim, int nnz)
{
	SpVec	   *v;
	Size		size;

	/* callers check their inputs; this only guards the allocation */
	if (nnz < 0 || nnz > SPVEC_MAX_NNZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("spvec cannot have more than %d non-zero elements",
						SPVEC_MAX_NNZ)));

	size = SPVEC_SIZE(nnz);
	v = (SpVec *) palloc0(size);
	SET_VARSIZE(v, size);
	v->dim = dim;
	v->nnz = nnz;
	return v;
}

void
spvec_check_same_dim(const SpVec *a, const SpVec *b)
{
	if (a->dim != b->dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different spvec dimensions %d and %d",
						a->dim, b->dim)));
}

float4
spvec_inner_product(const SpVec *a, const SpVec *b)
{
	const float4 *ax = SPVEC_VALUES(a);
	const float4 *bx = SPVEC_VALUES(b);
	double		sum = 0.0;
	int			i = 0;
	int			j = 0;

	while (i < a->nnz && j < b->nnz)
	{
		if (a->indices[i] < b->indices[j])
			i++;
		else if (a->indices[i] > b->indices[j])
			j++;
		else
		{
			/* the product of two float4 values is exact in double */
			sum += (double) ax[i] * (double) bx[j];
			i++;
			j++;
		}
	}

	/*
	 * The one rounding the access method ranks by.  A sum beyond the float4
	 * range becomes +-Infinity, which still ranks in the right place.
	 */
	return (float4) sum;
}

/* squared norm, summed in double in index order */
static double
spvec_norm2(const SpVec *a)
{
	const float4 *ax = SPVEC_VALUES(a);
	double		sum = 0.0;
	int			i;

	for (i = 0; i < a->nnz; i++)
		sum += (double) ax[i] * (double) ax[i];
	return sum;
}

/*
 * Detoasted copies are freed at once: these functions run once per row in
 * sorts and index builds, where per-call garbage would pile up.
 */
#define FREE_ARGS(a, b) \
	do { \
		PG_FREE_IF_COPY(a, 0); \
		PG_FREE_IF_COPY(b, 1); \
	} while (0)

/* inner_product's float4 value, widened */
Datum
spvec_inner_product_sql(PG_FUNCTION_ARGS)
{
	SpVec	   *a = PG_GETARG_SPVEC_P(0);
	SpVec	   *b = PG_GETARG_SPVEC_P(1);
	float4		ip;

	spvec_check_same_dim(a, b);
	ip = spvec_inner_product(a, b);

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8((float8) ip);
}

Datum
spvec_negative_inner_product(PG_FUNCTION_ARGS)
{
	SpVec	   *a = PG_GETARG_SPVEC_P(0);
	SpVec	   *b = PG_GETARG_SPVEC_P(1);
	float4		ip;

	spvec_check_same_dim(a, b);
	ip = spvec_inner_product(a, b);

	FREE_ARGS(a, b);
	/* 0.0 - ip rather than -ip: orthogonal vectors give 0, not "-0" */
	PG_RETURN_FLOAT8(0.0 - (float8) ip);
}

Datum
spvec_cosine_distance(PG_FUNCTION_ARGS)
{
	SpVec	   *a = PG_GETARG_SPVEC_P(0);
	SpVec	   *b = PG_GETARG_SPVEC_P(1);
	const float4 *ax = SPVEC_VALUES(a);
	const float4 *bx = SPVEC_VALUES(b);
	double		dot = 0.0;
	double		na;
	double		nb;
	double		r;
	int			i = 0;
	int			j = 0;

	spvec_check_same_dim(a, b);

	while (i < a->nnz && j < b->nnz)
	{
		if (a->indices[i] < b->indices[j])
			i++;
		else if (a->indices[i] > b->indices[j])
			j++;
		else
		{
			dot += (double) ax[i] * (double) bx[j];
			i++;
			j++;
		}
	}
	na = spvec_norm2(a);
	nb = spvec_norm2(b);

	/* the angle to a zero vector is undefined; pgvector answers NaN too */
	if (na == 0.0 || nb == 0.0)
		r = NAN;
	else
	{
		/* one sqrt of the product rounds once instead of twice */
		double		sim = dot / sqrt(na * nb);

		/* rounding can push |sim| slightly past 1; keep r in [0, 2] */
		if (sim > 1.0)
			sim = 1.0;
		else if (sim < -1.0)
			sim = -1.0;
		r = 1.0 - sim;
	}

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(r);
}

Datum
spvec_l2_distance(PG_FUNCTION_ARGS)
{
	SpVec	   *a = PG_GETARG_SPVEC_P(0);
	SpVec	   *b = PG_GETARG_SPVEC_P(1);
	const float4 *ax = SPVEC_VALUES(a);
	const float4 *bx = SPVEC_VALUES(b);
	double		sum = 0.0;
	int			i = 0;
	int			j = 0;

	spvec_check_same_dim(a, b);

	/* the union of both index lists, in ascending order */
	while (i < a->nnz || j < b->nnz)
	{
		double		d;

		if (j == b->nnz || (i < a->nnz && a->indices[i] < b->indices[j]))
			d = (double) ax[i++];
		else if (i == a->nnz || a->indices[i] > b->indices[j])
			d = (double) bx[j++];
		else
			d = (double) ax[i++] - (double) bx[j++];
		sum += d * d;
	}

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(sqrt(sum));
}

Datum
spvec_l2_norm(PG_FUNCTION_ARGS)
{
	SpVec	   *a = PG_GETARG_SPVEC_P(0);
	double		r = sqrt(spvec_norm2(a));

	PG_FREE_IF_COPY(a, 0);
	PG_RETURN_FLOAT8(r);
}

/*
 * nnz() and dims() read the header alone: with STORAGE external a large
 * vector is not fetched whole for them.
 */
static SpVec *
spvec_header(FunctionCallInfo fcinfo)
{
	return (SpVec *) PG_DETOAST_DATUM_SLICE(PG_GETARG_DATUM(0), 0,
											offsetof(SpVec, indices));
}

Datum
spvec_nnz(PG_FUNCTION_ARGS)
{
	SpVec	   *a = spvec_header(fcinfo);
	int32		nnz = a->nnz;

	PG_FREE_IF_COPY(a, 0);
	PG_RETURN_INT32(nnz);
}

Datum
spvec_dims(PG_FUNCTION_ARGS)
{
	SpVec	   *a = spvec_header(fcinfo);
	int32		dim = a->dim;

	PG_FREE_IF_COPY(a, 0);
	PG_RETURN_INT32(dim);
}
