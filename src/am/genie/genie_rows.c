/*
 * genie_rows.c
 *		The row operator class of genie: an integer[] holds a row's
 *		attributes by position (an expression index over ARRAY[a, b, ...]),
 *		and a query (type genie_ranges) is a list of (attribute, low, high)
 *		items; a row matches an item when its attribute lies in the range.
 *
 * The keyword of attribute i with value v is base(i) + (v as an unsigned
 * order-preserving 32-bit number), base(i) a hash of i below 2^62, so the
 * keywords of an item's range are consecutive and the index's value map
 * turns the range into a run of lists (genie_query_spvec).
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "genie.h"
#include "genie_keywords.h"

PG_FUNCTION_INFO_V1(genie_ranges_in);
PG_FUNCTION_INFO_V1(genie_ranges_out);
PG_FUNCTION_INFO_V1(genie_ranges_make);
PG_FUNCTION_INFO_V1(genie_row_keywords_proc);
PG_FUNCTION_INFO_V1(genie_row_query_proc);
PG_FUNCTION_INFO_V1(genie_row_distance);

#define PG_GETARG_RANGES_P(x) ((GenieRanges *) PG_DETOAST_DATUM(PG_GETARG_DATUM(x)))

static uint64
attr_base(int32 attr)
{
	return genie_hash64(&attr, sizeof(attr), UINT64CONST(0x726f77)) >> 2;
}

static uint64
row_keyword(int32 attr, int32 value)
{
	return attr_base(attr) + (uint64) ((uint32) value ^ 0x80000000u);
}

static GenieRanges *
ranges_alloc(int n)
{
	Size		size = offsetof(GenieRanges, items) + sizeof(GenieRange) * n;
	GenieRanges *r = palloc0(size);

	SET_VARSIZE(r, size);
	r->nitems = n;
	return r;
}

static void
check_count(int n)
{
	if (n > GENIE_MAX_RANGES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie_ranges value may have at most %d items, not %d",
						GENIE_MAX_RANGES, n)));
}

static bool
parse_int32(const char **p, int32 *out)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(*p, &end, 10);
	if (end == *p || errno != 0 || v < PG_INT32_MIN || v > PG_INT32_MAX)
		return false;
	*out = (int32) v;
	*p = end;
	return true;
}

static void
skip_space(const char **p)
{
	while (isspace((unsigned char) **p))
		(*p)++;
}

/* text form: {attr:lo..hi, attr:value, ...}, attributes from 1 */
Datum
genie_ranges_in(PG_FUNCTION_ARGS)
{
	const char *lit = PG_GETARG_CSTRING(0);
	const char *p = lit;
	GenieRanges *r;
	int			n = 0;
	int			cap = 8;
	GenieRange *items = palloc(sizeof(GenieRange) * cap);

	skip_space(&p);
	if (*p++ != '{')
		goto syntax;
	skip_space(&p);
	if (*p == '}')
		p++;
	else
		for (;;)
		{
			GenieRange it;

			skip_space(&p);
			if (!parse_int32(&p, &it.attr) || it.attr < 1)
				goto syntax;
			skip_space(&p);
			if (*p++ != ':')
				goto syntax;
			skip_space(&p);
			if (!parse_int32(&p, &it.lo))
				goto syntax;
			skip_space(&p);
			it.hi = it.lo;
			if (p[0] == '.' && p[1] == '.')
			{
				p += 2;
				skip_space(&p);
				if (!parse_int32(&p, &it.hi))
					goto syntax;
				skip_space(&p);
			}
			if (n == cap)
			{
				check_count(n + 1);
				cap *= 2;
				items = repalloc(items, sizeof(GenieRange) * cap);
			}
			items[n++] = it;
			if (*p == ',')
			{
				p++;
				continue;
			}
			if (*p++ != '}')
				goto syntax;
			break;
		}
	skip_space(&p);
	if (*p != '\0')
		goto syntax;
	check_count(n);
	r = ranges_alloc(n);
	memcpy(r->items, items, sizeof(GenieRange) * n);
	PG_RETURN_POINTER(r);

syntax:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type genie_ranges: \"%s\"", lit),
			 errdetail("The form is {attribute:low..high, attribute:value, ...}, attributes numbered from 1.")));
	PG_RETURN_NULL();
}

Datum
genie_ranges_out(PG_FUNCTION_ARGS)
{
	GenieRanges *r = PG_GETARG_RANGES_P(0);
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < r->nitems; i++)
	{
		const GenieRange *it = &r->items[i];

		appendStringInfo(&s, "%s%d:%d", i ? "," : "", it->attr, it->lo);
		if (it->hi != it->lo)
			appendStringInfo(&s, "..%d", it->hi);
	}
	appendStringInfoChar(&s, '}');
	PG_RETURN_CSTRING(s.data);
}

static void
check_array(ArrayType *a, const char *what)
{
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be one-dimensional", what)));
}

/*
 * genie_ranges(lo integer[], hi integer[]): attribute i has the range
 * lo[i]..hi[i]; a NULL bound is open, and an attribute with both NULL has
 * no item.
 */
Datum
genie_ranges_make(PG_FUNCTION_ARGS)
{
	ArrayType  *lo = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *hi = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *lov,
			   *hiv;
	bool	   *lon,
			   *hin;
	int			nlo,
				nhi;
	int			n = 0;
	GenieRanges *r;

	check_array(lo, "the low bounds");
	check_array(hi, "the high bounds");
	deconstruct_array(lo, INT4OID, 4, true, TYPALIGN_INT, &lov, &lon, &nlo);
	deconstruct_array(hi, INT4OID, 4, true, TYPALIGN_INT, &hiv, &hin, &nhi);
	if (nlo != nhi)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the low and high bounds must have as many elements, not %d and %d",
						nlo, nhi)));
	check_count(nlo);
	r = ranges_alloc(nlo);
	for (int i = 0; i < nlo; i++)
	{
		if (lon[i] && hin[i])
			continue;
		r->items[n].attr = i + 1;
		r->items[n].lo = lon[i] ? PG_INT32_MIN : DatumGetInt32(lov[i]);
		r->items[n].hi = hin[i] ? PG_INT32_MAX : DatumGetInt32(hiv[i]);
		n++;
	}
	r->nitems = n;
	SET_VARSIZE(r, offsetof(GenieRanges, items) + sizeof(GenieRange) * n);
	PG_RETURN_POINTER(r);
}

/* a row's attributes: values[i] is attribute i + 1 */
static int
row_values(ArrayType *a, int32 **values, bool **nulls)
{
	Datum	   *d;
	int			n;

	check_array(a, "a genie row");
	deconstruct_array(a, INT4OID, 4, true, TYPALIGN_INT, &d, nulls, &n);
	*values = palloc(sizeof(int32) * Max(n, 1));
	for (int i = 0; i < n; i++)
		(*values)[i] = (*nulls)[i] ? 0 : DatumGetInt32(d[i]);
	return n;
}

/* support function 1: (integer[], internal nkeys): one keyword per non-NULL attribute */
Datum
genie_row_keywords_proc(PG_FUNCTION_ARGS)
{
	int32	   *values;
	bool	   *nulls;
	int			n = row_values(PG_GETARG_ARRAYTYPE_P(0), &values, &nulls);
	uint64	   *keys = palloc(sizeof(uint64) * Max(n, 1));
	uint32	   *nkeys = (uint32 *) PG_GETARG_POINTER(1);

	*nkeys = 0;
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			keys[(*nkeys)++] = row_keyword(i + 1, values[i]);
	PG_RETURN_POINTER(genie_sort_unique(keys, nkeys));
}

/* support function 2: (genie_ranges, internal nitems, int2): an item per range */
Datum
genie_row_query_proc(PG_FUNCTION_ARGS)
{
	GenieRanges *r = PG_GETARG_RANGES_P(0);
	uint32	   *nitems = (uint32 *) PG_GETARG_POINTER(1);
	GenieItem  *items = palloc(sizeof(GenieItem) * Max(r->nitems, 1));

	*nitems = 0;
	for (int i = 0; i < r->nitems; i++)
	{
		const GenieRange *it = &r->items[i];

		if (it->lo > it->hi)
			continue;			/* matches nothing */
		items[*nitems].lo = row_keyword(it->attr, it->lo);
		items[*nitems].hi = row_keyword(it->attr, it->hi);
		(*nitems)++;
	}
	PG_RETURN_POINTER(items);
}

/* integer[] <&> genie_ranges: minus the number of items the row's attributes lie in */
Datum
genie_row_distance(PG_FUNCTION_ARGS)
{
	int32	   *values;
	bool	   *nulls;
	int			n = row_values(PG_GETARG_ARRAYTYPE_P(0), &values, &nulls);
	GenieRanges *r = PG_GETARG_RANGES_P(1);
	int			count = 0;

	for (int i = 0; i < r->nitems; i++)
	{
		const GenieRange *it = &r->items[i];
		int			a = it->attr - 1;

		if (a < n && !nulls[a] && values[a] >= it->lo && values[a] <= it->hi)
			count++;
	}
	PG_RETURN_FLOAT8(-(double) count);
}
