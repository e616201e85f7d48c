/*
 * vecarray.c
 *		Validation of real[] vector arguments and distance kernels.
 *
 * Vectors are plain real[] values.  Every entry point (operators, index
 * build, insert, scan keys) goes through gi_array_floats() so that the
 * same input is accepted or rejected the same way everywhere.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "vecarray.h"

const float4 *
gi_array_floats(ArrayType *a, int *dim, const char *what)
{
	const float4 *x;
	int			n;
	int			i;

	/* only reachable through misuse from C: the SQL signatures say real[] */
	if (ARR_ELEMTYPE(a) != FLOAT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s must be an array of real, not of %s",
						what, format_type_be(ARR_ELEMTYPE(a)))));

	/* an empty array has ndim 0 in PostgreSQL, whatever it was written as */
	if (ARR_NDIM(a) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must have at least 1 dimension", what)));
	if (ARR_NDIM(a) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be one-dimensional", what),
				 errdetail("Array has %d dimensions.", ARR_NDIM(a))));

	n = ARR_DIMS(a)[0];
	if (n < 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must have at least 1 dimension", what)));
	if (n > GI_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s cannot have more than %d dimensions", what,
						GI_MAX_DIM),
				 errdetail("It has %d dimensions.", n)));

	/*
	 * A null bitmap may exist with no null actually present, so look at the
	 * elements rather than at ARR_HASNULL alone.  Without nulls the float4
	 * elements are stored contiguously, which is what lets us return a
	 * pointer into the array.
	 */
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain nulls", what)));

	x = (const float4 *) ARR_DATA_PTR(a);
	for (i = 0; i < n; i++)
	{
		if (isnan(x[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("%s must not contain NaN", what)));
		if (isinf(x[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("%s must not contain infinite values", what)));
	}

	*dim = n;
	return x;
}

void
gi_check_same_dim(int a, int b)
{
	if (a != b)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different vector dimensions %d and %d", a, b)));
}

/*
 * The kernels accumulate in double: with up to GI_MAX_DIM terms a float
 * accumulator would lose several digits, and the squares of large float4
 * values would overflow float.
 */
double
gi_l2_squared(const float4 *a, const float4 *b, int dim)
{
	double		sum = 0.0;
	int			i;

	for (i = 0; i < dim; i++)
	{
		double		d = (double) a[i] - (double) b[i];

		sum += d * d;
	}
	return sum;
}

double
gi_inner_product(const float4 *a, const float4 *b, int dim)
{
	double		sum = 0.0;
	int			i;

	for (i = 0; i < dim; i++)
		sum += (double) a[i] * (double) b[i];
	return sum;
}

double
gi_cosine_distance(const float4 *a, const float4 *b, int dim)
{
	double		dot = 0.0;
	double		na = 0.0;
	double		nb = 0.0;
	double		sim;
	int			i;

	for (i = 0; i < dim; i++)
	{
		dot += (double) a[i] * (double) b[i];
		na += (double) a[i] * (double) a[i];
		nb += (double) b[i] * (double) b[i];
	}

	/* the angle to a zero vector is undefined; pgvector answers NaN too */
	if (na == 0.0 || nb == 0.0)
		return NAN;

	/* one sqrt of the product rounds once instead of twice */
	sim = dot / sqrt(na * nb);

	/* rounding can push |sim| slightly past 1; keep the distance in [0, 2] */
	if (sim > 1.0)
		sim = 1.0;
	else if (sim < -1.0)
		sim = -1.0;
	return 1.0 - sim;
}
