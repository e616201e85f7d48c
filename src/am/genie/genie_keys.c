/*
 * genie_keys.c
 *		The keywords of the operator classes (sets of int4, int8 or text,
 *		words of a document, n-grams of a string), their support functions,
 *		and the match-count operators.
 *
 * Every value becomes a sorted array of distinct 64-bit keywords; an
 * operator returns minus the number of keywords its two sides share, so
 * that ORDER BY col <op> query LIMIT k gives the rows that match most.
 * The index computes the same keywords through support functions 1 and 2.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/qunique.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "genie.h"
#include "genie_keywords.h"

PG_FUNCTION_INFO_V1(genie_array_keywords_proc);
PG_FUNCTION_INFO_V1(genie_array_query_proc);
PG_FUNCTION_INFO_V1(genie_array_distance);
PG_FUNCTION_INFO_V1(genie_words_keywords_proc);
PG_FUNCTION_INFO_V1(genie_words_query_proc);
PG_FUNCTION_INFO_V1(genie_words_distance);

static int
key_cmp(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : x > y;
}

/* keys sorted, duplicates removed; *n updated */
uint64 *
genie_sort_unique(uint64 *keys, uint32 *n)
{
	if (*n > 1)
	{
		qsort(keys, *n, sizeof(uint64), key_cmp);
		*n = (uint32) qunique(keys, *n, sizeof(uint64), key_cmp);
	}
	return keys;
}

/* the number of keywords two sorted distinct arrays share */
uint32
genie_count_common(const uint64 *a, uint32 na, const uint64 *b, uint32 nb)
{
	uint32		i = 0,
				j = 0,
				c = 0;

	while (i < na && j < nb)
	{
		if (a[i] < b[j])
			i++;
		else if (a[i] > b[j])
			j++;
		else
		{
			c++;
			i++;
			j++;
		}
	}
	return c;
}

/* a query of single keywords as items */
GenieItem *
genie_items_of_keys(const uint64 *keys, uint32 nkeys)
{
	GenieItem  *items = palloc(sizeof(GenieItem) * Max(nkeys, 1));

	for (uint32 i = 0; i < nkeys; i++)
		items[i].lo = items[i].hi = keys[i];
	return items;
}

/*
 * The elements of an int4[], int8[] or text[] array, of any shape: an
 * integer is its own keyword, a text its genie_hash64; NULL elements are
 * no keyword.
 */
uint64 *
genie_array_keywords(ArrayType *arr, uint32 *n)
{
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	uint64	   *keys;
	uint32		m = 0;

	if (elemtype != INT4OID && elemtype != INT8OID && elemtype != TEXTOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("genie sets are arrays of integer, bigint or text, not %s",
						format_type_be(elemtype))));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	keys = palloc(sizeof(uint64) * Max(nelems, 1));
	for (int i = 0; i < nelems; i++)
	{
		if (nulls[i])
			continue;
		if (elemtype == INT4OID)
			keys[m++] = (uint64) (int64) DatumGetInt32(elems[i]);
		else if (elemtype == INT8OID)
			keys[m++] = (uint64) DatumGetInt64(elems[i]);
		else
		{
			text	   *t = DatumGetTextPP(elems[i]);

			keys[m++] = genie_hash64(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), 0);
		}
	}
	*n = m;
	return genie_sort_unique(keys, n);
}

/* the distinct words of a document (genie_words) */
uint64 *
genie_text_word_keywords(text *t, uint32 *n)
{
	const char *s = VARDATA_ANY(t);
	size_t		len = VARSIZE_ANY_EXHDR(t);
	uint32		cap = 16;
	uint64	   *keys;

	for (;;)
	{
		uint32		got;

		keys = palloc(sizeof(uint64) * cap);
		got = genie_words(s, len, keys, cap);
		if (got <= cap)
		{
			*n = got;
			return keys;
		}
		pfree(keys);
		cap = got;
	}
}

void
genie_check_ngram_n(int n)
{
	if (n < 1 || n > GENIE_NGRAM_MAX_N)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d, not %d", GENIE_NGRAM_MAX_N, n)));
}

/* the (gram, occurrence) keywords of a string (genie_ngrams), sorted */
uint64 *
genie_text_ngram_keywords(const char *s, Size len, int n, uint32 *nkeys)
{
	/* a string of k >= n characters has k - n + 1 grams, a shorter one 1 */
	uint32		cap = (uint32) Min(len + 1, (Size) PG_UINT32_MAX);
	uint64	   *keys;

	genie_check_ngram_n(n);
	if ((Size) cap > MaxAllocHugeSize / sizeof(uint64))
		elog(ERROR, "string too long for n-grams");
	keys = palloc_extended(sizeof(uint64) * cap, MCXT_ALLOC_HUGE);
	*nkeys = genie_ngrams(s, len, n, keys, cap);
	if (*nkeys > cap)
		elog(ERROR, "genie_ngrams needs %u keywords for %zu bytes", *nkeys, len);
	return genie_sort_unique(keys, nkeys);
}

static Datum
distance(uint64 *a, uint32 na, uint64 *b, uint32 nb)
{
	PG_RETURN_FLOAT8(-(double) genie_count_common(a, na, b, nb));
}

/* support function 1 of the set classes: (anyarray, internal nkeys) */
Datum
genie_array_keywords_proc(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(genie_array_keywords(PG_GETARG_ARRAYTYPE_P(0),
										   (uint32 *) PG_GETARG_POINTER(1)));
}

/* support function 2: (a set of the row's type, internal nitems, int2) */
Datum
genie_array_query_proc(PG_FUNCTION_ARGS)
{
	uint32	   *n = (uint32 *) PG_GETARG_POINTER(1);
	uint64	   *keys = genie_array_keywords(PG_GETARG_ARRAYTYPE_P(0), n);

	PG_RETURN_POINTER(genie_items_of_keys(keys, *n));
}

/* row <&> query: minus the number of distinct query elements in the row */
Datum
genie_array_distance(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_GETARG_ARRAYTYPE_P(1);
	uint32		na,
				nb;
	uint64	   *ka,
			   *kb;

	if (ARR_ELEMTYPE(a) != ARR_ELEMTYPE(b))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compare sets of %s and %s",
						format_type_be(ARR_ELEMTYPE(a)),
						format_type_be(ARR_ELEMTYPE(b)))));
	ka = genie_array_keywords(a, &na);
	kb = genie_array_keywords(b, &nb);
	return distance(ka, na, kb, nb);
}

/* support function 1 of the words class */
Datum
genie_words_keywords_proc(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(genie_text_word_keywords(PG_GETARG_TEXT_PP(0),
											   (uint32 *) PG_GETARG_POINTER(1)));
}

/* support function 2: a query is a document */
Datum
genie_words_query_proc(PG_FUNCTION_ARGS)
{
	uint32	   *n = (uint32 *) PG_GETARG_POINTER(1);
	uint64	   *keys = genie_text_word_keywords(PG_GETARG_TEXT_PP(0), n);

	PG_RETURN_POINTER(genie_items_of_keys(keys, *n));
}

/* doc <&> query: minus the number of distinct query words in the document */
Datum
genie_words_distance(PG_FUNCTION_ARGS)
{
	uint32		na,
				nb;
	uint64	   *ka = genie_text_word_keywords(PG_GETARG_TEXT_PP(0), &na);
	uint64	   *kb = genie_text_word_keywords(PG_GETARG_TEXT_PP(1), &nb);

	return distance(ka, na, kb, nb);
}
