/*
 * vector_ops.c
 *		SQL-callable distance functions on real[] (pgvector's conventions).
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "utils/array.h"

#include "vecarray.h"

PG_FUNCTION_INFO_V1(l2_distance);
PG_FUNCTION_INFO_V1(l2_squared_distance);
PG_FUNCTION_INFO_V1(inner_product);
PG_FUNCTION_INFO_V1(negative_inner_product);
PG_FUNCTION_INFO_V1(cosine_distance);

/*
 * Fetch and validate both arguments; all functions here take
 * (real[], real[]) and need vectors of equal dimension.
 */
static int
get_two_vectors(FunctionCallInfo fcinfo, ArrayType **a, ArrayType **b,
				const float4 **x, const float4 **y)
{
	int			da;
	int			db;

	*a = PG_GETARG_ARRAYTYPE_P(0);
	*b = PG_GETARG_ARRAYTYPE_P(1);
	*x = gi_array_floats(*a, &da, "vector");
	*y = gi_array_floats(*b, &db, "vector");
	gi_check_same_dim(da, db);
	return da;
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

Datum
l2_distance(PG_FUNCTION_ARGS)
{
	ArrayType  *a;
	ArrayType  *b;
	const float4 *x;
	const float4 *y;
	int			dim;
	double		r;

	dim = get_two_vectors(fcinfo, &a, &b, &x, &y);
	r = sqrt(gi_l2_squared(x, y, dim));

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(r);
}

Datum
l2_squared_distance(PG_FUNCTION_ARGS)
{
	ArrayType  *a;
	ArrayType  *b;
	const float4 *x;
	const float4 *y;
	int			dim;
	double		r;

	dim = get_two_vectors(fcinfo, &a, &b, &x, &y);
	r = gi_l2_squared(x, y, dim);

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(r);
}

Datum
inner_product(PG_FUNCTION_ARGS)
{
	ArrayType  *a;
	ArrayType  *b;
	const float4 *x;
	const float4 *y;
	int			dim;
	double		r;

	dim = get_two_vectors(fcinfo, &a, &b, &x, &y);
	r = gi_inner_product(x, y, dim);

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(r);
}

Datum
negative_inner_product(PG_FUNCTION_ARGS)
{
	ArrayType  *a;
	ArrayType  *b;
	const float4 *x;
	const float4 *y;
	int			dim;
	double		r;

	dim = get_two_vectors(fcinfo, &a, &b, &x, &y);
	/* 0.0 - ip rather than -ip: orthogonal vectors give 0, not "-0" */
	r = 0.0 - gi_inner_product(x, y, dim);

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(r);
}

Datum
cosine_distance(PG_FUNCTION_ARGS)
{
	ArrayType  *a;
	ArrayType  *b;
	const float4 *x;
	const float4 *y;
	int			dim;
	double		r;

	dim = get_two_vectors(fcinfo, &a, &b, &x, &y);
	r = gi_cosine_distance(x, y, dim);

	FREE_ARGS(a, b);
	PG_RETURN_FLOAT8(r);
}
