/*
 * spvec_io.c
 *		The spvec type's text and binary forms, its type modifier, and the
 *		casts from and to real[].
 *
 * The text form is pgvector's sparsevec form, {index:value,...}/dim, with
 * 1-based indices in any order; the output lists them in ascending order
 * with float4 values in their shortest exact form.  Every way in (text,
 * binary, casts, spvec(int4[], real[], int4)) makes the same checks, so
 * that none stores a vector another would refuse: a dimension of 1 ..
 * SPVEC_MAX_DIM, no more elements than dimensions, indices within 1 .. dim
 * without duplicates, finite values.  Zeros are dropped, except in binary
 * input, which refuses them since spvec_send never writes one.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "spvec.h"

PG_FUNCTION_INFO_V1(spvec_in);
PG_FUNCTION_INFO_V1(spvec_out);
PG_FUNCTION_INFO_V1(spvec_typmod_in);
PG_FUNCTION_INFO_V1(spvec_recv);
PG_FUNCTION_INFO_V1(spvec_send);
PG_FUNCTION_INFO_V1(spvec_typmod_cast);
PG_FUNCTION_INFO_V1(spvec_from_real_array);
PG_FUNCTION_INFO_V1(spvec_to_real_array);
PG_FUNCTION_INFO_V1(spvec_from_parts);

/* one element as written: 1-based index, value possibly zero */
typedef struct SpVecEntry
{
	int32		index;
	float4		value;
} SpVecEntry;

static void
check_dim(long dim)
{
	if (dim < 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("spvec must have at least 1 dimension"),
				 errdetail("It has %ld dimensions.", dim)));
	if (dim > SPVEC_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("spvec cannot have more than %d dimensions",
						SPVEC_MAX_DIM),
				 errdetail("It has %ld dimensions.", dim)));
}

static void
check_expected_dim(int32 typmod, int dim)
{
	if (typmod != -1 && typmod != dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("expected %d dimensions, not %d", typmod, dim)));
}

static void
check_value(float4 value)
{
	if (isnan(value))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("NaN not allowed in spvec")));
	if (isinf(value))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("infinite value not allowed in spvec")));
}

static void
check_count(long n, int dim)
{
	if (n > dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("spvec cannot have more elements than dimensions"),
				 errdetail("It has %ld elements and %d dimensions.", n, dim)));
}

static int
entry_cmp(const void *a, const void *b)
{
	int32		x = ((const SpVecEntry *) a)->index;
	int32		y = ((const SpVecEntry *) b)->index;

	return (x > y) - (x < y);
}

/*
 * The vector of n entries in any order, dim already checked: sorts them,
 * checks indices and values, drops zeros.
 */
static SpVec *
spvec_build(SpVecEntry *e, int n, int dim)
{
	SpVec	   *v;
	float4	   *values;
	int			nnz = 0;
	int			i;
	int			j;

	check_count(n, dim);

	for (i = 1; i < n; i++)
		if (e[i].index <= e[i - 1].index)
			break;
	if (i < n)
		qsort(e, n, sizeof(SpVecEntry), entry_cmp);

	for (i = 0; i < n; i++)
	{
		if (e[i].index < 1 || e[i].index > dim)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("spvec index %d is out of range", e[i].index),
					 errdetail("Indices must be between 1 and %d.", dim)));
		if (i > 0 && e[i].index == e[i - 1].index)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("spvec index %d appears more than once",
							e[i].index)));
		check_value(e[i].value);
		if (e[i].value != 0)
			nnz++;
	}

	v = spvec_alloc(dim, nnz);
	values = SPVEC_VALUES(v);
	for (i = 0, j = 0; i < n; i++)
	{
		if (e[i].value == 0)
			continue;
		v->indices[j] = e[i].index - 1;
		values[j] = e[i].value;
		j++;
	}
	return v;
}

/* the same characters as pgvector's (and PostgreSQL's array input) */
static inline bool
spvec_isspace(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' ||
		ch == '\v' || ch == '\f';
}

static void spvec_syntax_error(const char *lit, const char *detail) pg_attribute_noreturn();

static void
spvec_syntax_error(const char *lit, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type spvec: \"%s\"", lit),
			 errdetail("%s", detail)));
}

#define SKIP_SPACE(p) \
	do { \
		while (spvec_isspace(*(p))) \
			(p)++; \
	} while (0)

Datum
spvec_in(PG_FUNCTION_ARGS)
{
	char	   *lit = PG_GETARG_CSTRING(0);
	int32		typmod = PG_GETARG_INT32(2);
	SpVecEntry *entries;
	SpVec	   *result;
	char	   *pt;
	char	   *end;
	long		dim;
	int			maxn = 1;
	int			n = 0;

	/* every entry but the last ends in a comma: a bound on their number */
	for (pt = lit; *pt != '\0'; pt++)
		if (*pt == ',')
			maxn++;
	entries = (SpVecEntry *) palloc(sizeof(SpVecEntry) * maxn);

	pt = lit;
	SKIP_SPACE(pt);
	if (*pt != '{')
		spvec_syntax_error(lit, "Vector contents must start with \"{\".");
	pt++;
	SKIP_SPACE(pt);

	if (*pt == '}')
		pt++;
	else
	{
		for (;;)
		{
			long		index;
			float4		value;

			if (n >= maxn)		/* cannot happen, see above */
				elog(ERROR, "spvec input has more entries than expected");

			SKIP_SPACE(pt);
			errno = 0;
			index = strtol(pt, &end, 10);
			if (end == pt)
				spvec_syntax_error(lit, "Expected an index.");
			if (errno == ERANGE || index < INT_MIN || index > INT_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("spvec index \"%s\" is out of range",
								pnstrdup(pt, end - pt))));
			pt = end;
			SKIP_SPACE(pt);
			if (*pt != ':')
				spvec_syntax_error(lit, "Expected \":\" after an index.");
			pt++;
			SKIP_SPACE(pt);

			/* strtof like float4in: no double rounding through double */
			errno = 0;
			value = strtof(pt, &end);
			if (end == pt)
				spvec_syntax_error(lit, "Expected a value after \":\".");
			/* ERANGE with a denormal result is fine, as in float4in */
			if (errno == ERANGE && (value == 0 || isinf(value)))
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("\"%s\" is out of range for type real",
								pnstrdup(pt, end - pt))));
			check_value(value);
			entries[n].index = (int32) index;
			entries[n].value = value;
			n++;
			pt = end;
			SKIP_SPACE(pt);

			if (*pt == ',')
				pt++;
			else if (*pt == '}')
			{
				pt++;
				break;
			}
			else
				spvec_syntax_error(lit, "Expected \",\" or \"}\" after a value.");
		}
	}

	SKIP_SPACE(pt);
	if (*pt != '/')
		spvec_syntax_error(lit, "Expected \"/\" and the dimension after \"}\".");
	pt++;
	SKIP_SPACE(pt);
	errno = 0;
	dim = strtol(pt, &end, 10);
	if (end == pt)
		spvec_syntax_error(lit, "Expected the dimension after \"/\".");
	if (errno == ERANGE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("spvec dimension \"%s\" is out of range",
						pnstrdup(pt, end - pt))));
	pt = end;
	SKIP_SPACE(pt);
	if (*pt != '\0')
		spvec_syntax_error(lit, "Junk after the dimension.");

	check_dim(dim);
	check_expected_dim(typmod, (int) dim);

	result = spvec_build(entries, n, (int) dim);
	pfree(entries);
	PG_RETURN_SPVEC_P(result);
}

Datum
spvec_out(PG_FUNCTION_ARGS)
{
	SpVec	   *v = PG_GETARG_SPVEC_P(0);
	const float4 *values = SPVEC_VALUES(v);
	StringInfoData buf;
	int			i;

	/*
	 * A StringInfo rather than one buffer sized for the worst case: a vector
	 * too large to print fails with "out of memory" instead of an invalid
	 * allocation request.
	 */
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (i = 0; i < v->nnz; i++)
	{
		char	   *p;

		/* ",", up to 10 digits, ":", a float, NUL */
		enlargeStringInfo(&buf, 1 + 10 + 1 + FLOAT_SHORTEST_DECIMAL_LEN);
		p = buf.data + buf.len;
		if (i > 0)
			*p++ = ',';
		p += pg_ltoa(v->indices[i] + 1, p);
		*p++ = ':';
		/* always the shortest exact form, whatever extra_float_digits */
		p += float_to_shortest_decimal_bufn(values[i], p);
		*p = '\0';
		buf.len = p - buf.data;
	}
	appendStringInfo(&buf, "}/%d", v->dim);

	PG_FREE_IF_COPY(v, 0);
	PG_RETURN_CSTRING(buf.data);
}

Datum
spvec_typmod_in(PG_FUNCTION_ARGS)
{
	ArrayType  *ta = PG_GETARG_ARRAYTYPE_P(0);
	int32	   *tl;
	int			n;

	tl = ArrayGetIntegerTypmods(ta, &n);

	if (n != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid type modifier"),
				 errdetail("spvec takes one type modifier, the dimension.")));
	if (*tl < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimensions for type spvec must be at least 1")));
	if (*tl > SPVEC_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimensions for type spvec cannot exceed %d",
						SPVEC_MAX_DIM)));

	PG_RETURN_INT32(*tl);
}

/*
 * Binary form: int32 dim, int32 nnz, int32 unused (0), nnz int32 0-based
 * indices in ascending order, nnz float4 non-zero finite values.
 */
Datum
spvec_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int32		typmod = PG_GETARG_INT32(2);
	SpVec	   *v;
	float4	   *values;
	int32		dim;
	int32		nnz;
	int32		unused;
	int			i;

	dim = (int32) pq_getmsgint(buf, sizeof(int32));
	nnz = (int32) pq_getmsgint(buf, sizeof(int32));
	unused = (int32) pq_getmsgint(buf, sizeof(int32));

	check_dim(dim);
	check_expected_dim(typmod, dim);
	if (nnz < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid number of spvec elements %d", nnz)));
	check_count(nnz, dim);
	if (unused != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("expected unused to be 0, not %d", unused)));
	/* before allocating what the header claims */
	if ((Size) nnz * (sizeof(int32) + sizeof(float4)) >
		(Size) (buf->len - buf->cursor))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("insufficient data left in message")));

	v = spvec_alloc(dim, nnz);
	values = SPVEC_VALUES(v);

	for (i = 0; i < nnz; i++)
	{
		int32		index = (int32) pq_getmsgint(buf, sizeof(int32));

		if (index < 0 || index >= dim)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("spvec index %d is out of range in binary form",
							index),
					 errdetail("Binary indices are 0-based and must be between 0 and %d.",
							   dim - 1)));
		if (i > 0 && index <= v->indices[i - 1])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("spvec indices must be in strictly ascending order in binary form")));
		v->indices[i] = index;
	}

	for (i = 0; i < nnz; i++)
	{
		values[i] = pq_getmsgfloat4(buf);
		check_value(values[i]);
		if (values[i] == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("spvec binary form cannot contain zero values")));
	}

	PG_RETURN_SPVEC_P(v);
}

Datum
spvec_send(PG_FUNCTION_ARGS)
{
	SpVec	   *v = PG_GETARG_SPVEC_P(0);
	const float4 *values = SPVEC_VALUES(v);
	StringInfoData buf;
	int			i;

	pq_begintypsend(&buf);
	pq_sendint32(&buf, v->dim);
	pq_sendint32(&buf, v->nnz);
	pq_sendint32(&buf, 0);
	for (i = 0; i < v->nnz; i++)
		pq_sendint32(&buf, v->indices[i]);
	for (i = 0; i < v->nnz; i++)
		pq_sendfloat4(&buf, values[i]);

	PG_FREE_IF_COPY(v, 0);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/* spvec -> spvec(n): the length coercion that applies the typmod */
Datum
spvec_typmod_cast(PG_FUNCTION_ARGS)
{
	SpVec	   *v = PG_GETARG_SPVEC_P(0);
	int32		typmod = PG_GETARG_INT32(1);

	check_expected_dim(typmod, v->dim);
	PG_RETURN_SPVEC_P(v);
}

/*
 * The number of elements of a one-dimensional array without nulls (0 for
 * an empty one); `what` names the argument in messages.
 */
static int
array_length_checked(ArrayType *a, Oid elemtype, const char *what)
{
	/* only reachable through misuse from C: the SQL signatures fix it */
	if (ARR_ELEMTYPE(a) != elemtype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s must be an array of %s, not of %s", what,
						format_type_be(elemtype),
						format_type_be(ARR_ELEMTYPE(a)))));
	/* an empty array has ndim 0 in PostgreSQL, whatever it was written as */
	if (ARR_NDIM(a) == 0)
		return 0;
	if (ARR_NDIM(a) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be one-dimensional", what),
				 errdetail("Array has %d dimensions.", ARR_NDIM(a))));
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain nulls", what)));
	return ARR_DIMS(a)[0];
}

/* real[] -> spvec: the dense form, zeros dropped */
Datum
spvec_from_real_array(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);
	int32		typmod = PG_GETARG_INT32(1);
	const float4 *x;
	float4	   *values;
	SpVec	   *v;
	int			dim;
	int			nnz = 0;
	int			i;
	int			j;

	dim = array_length_checked(a, FLOAT4OID, "array");
	check_dim(dim);
	check_expected_dim(typmod, dim);

	x = (const float4 *) ARR_DATA_PTR(a);
	for (i = 0; i < dim; i++)
	{
		check_value(x[i]);
		if (x[i] != 0)
			nnz++;
	}

	v = spvec_alloc(dim, nnz);
	values = SPVEC_VALUES(v);
	for (i = 0, j = 0; i < dim; i++)
	{
		if (x[i] == 0)
			continue;
		v->indices[j] = i;
		values[j] = x[i];
		j++;
	}

	PG_FREE_IF_COPY(a, 0);
	PG_RETURN_SPVEC_P(v);
}

/* spvec -> real[]: the dense form, dim elements, lower bound 1 */
Datum
spvec_to_real_array(PG_FUNCTION_ARGS)
{
	SpVec	   *v = PG_GETARG_SPVEC_P(0);
	const float4 *values = SPVEC_VALUES(v);
	ArrayType  *a;
	float4	   *x;
	Size		size;
	int			i;

	if ((Size) v->dim > MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("spvec of %d dimensions is too large for an array",
						v->dim),
				 errdetail("An array holds at most %d elements.",
						   (int) MaxArraySize)));

	/* built in place: zeroed, then the non-zeros written */
	size = ARR_OVERHEAD_NONULLS(1) + (Size) v->dim * sizeof(float4);
	a = (ArrayType *) palloc0(size);
	SET_VARSIZE(a, size);
	a->ndim = 1;
	a->dataoffset = 0;
	a->elemtype = FLOAT4OID;
	ARR_DIMS(a)[0] = v->dim;
	ARR_LBOUND(a)[0] = 1;
	x = (float4 *) ARR_DATA_PTR(a);
	for (i = 0; i < v->nnz; i++)
		x[v->indices[i]] = values[i];

	PG_FREE_IF_COPY(v, 0);
	PG_RETURN_ARRAYTYPE_P(a);
}

/* spvec(indices int4[], values real[], dim int4): 1-based, any order */
Datum
spvec_from_parts(PG_FUNCTION_ARGS)
{
	ArrayType  *ia = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *va = PG_GETARG_ARRAYTYPE_P(1);
	int32		dim = PG_GETARG_INT32(2);
	const int32 *idx;
	const float4 *val;
	SpVecEntry *entries;
	SpVec	   *v;
	int			n;
	int			nv;
	int			i;

	n = array_length_checked(ia, INT4OID, "indices");
	nv = array_length_checked(va, FLOAT4OID, "values");
	if (n != nv)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("indices and values must have the same length"),
				 errdetail("The indices array has %d elements, the values array %d.",
						   n, nv)));
	check_dim(dim);
	check_count(n, dim);

	idx = (const int32 *) ARR_DATA_PTR(ia);
	val = (const float4 *) ARR_DATA_PTR(va);
	entries = (SpVecEntry *) palloc(sizeof(SpVecEntry) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		entries[i].index = idx[i];
		entries[i].value = val[i];
	}
	v = spvec_build(entries, n, dim);

	pfree(entries);
	PG_FREE_IF_COPY(ia, 0);
	PG_FREE_IF_COPY(va, 1);
	PG_RETURN_SPVEC_P(v);
}
