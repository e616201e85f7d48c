/*
 * genie_ngram.c
 *		The n-gram operator class: a text value is the set of its
 *		(gram, occurrence) keywords, so two strings share the sum over
 *		grams of the smaller occurrence count.
 *
 * n is an option of the operator class (genie_ngram_ops(n = 4)); a query
 * names its own n: `col <%> 'text'` means n = 3, `col <%> genie_ngrams(
 * 'text', n)` any other, and the index refuses a query whose n is not its
 * own (the count would not bound the operator's).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/reloptions.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "genie.h"

PG_FUNCTION_INFO_V1(genie_ngram_query_in);
PG_FUNCTION_INFO_V1(genie_ngram_query_out);
PG_FUNCTION_INFO_V1(genie_ngrams_query);
PG_FUNCTION_INFO_V1(genie_ngram_options);
PG_FUNCTION_INFO_V1(genie_ngram_keywords_proc);
PG_FUNCTION_INFO_V1(genie_ngram_query_proc);
PG_FUNCTION_INFO_V1(genie_ngram_distance);
PG_FUNCTION_INFO_V1(genie_ngram_query_distance);

/* the ORDER BY strategies of genie_ngram_ops */
#define STRATEGY_TEXT	1
#define STRATEGY_QUERY	2

typedef struct NgramOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int32		n;
} NgramOptions;

static GenieNgramQuery *
make_query(const char *s, Size len, int n)
{
	GenieNgramQuery *q;

	genie_check_ngram_n(n);
	q = palloc(offsetof(GenieNgramQuery, str) + len);
	SET_VARSIZE(q, offsetof(GenieNgramQuery, str) + len);
	q->n = n;
	memcpy(q->str, s, len);
	return q;
}

#define PG_GETARG_NGRAM_QUERY_P(x) ((GenieNgramQuery *) PG_DETOAST_DATUM(PG_GETARG_DATUM(x)))

/* text form: n:string */
Datum
genie_ngram_query_in(PG_FUNCTION_ARGS)
{
	char	   *lit = PG_GETARG_CSTRING(0);
	char	   *colon = strchr(lit, ':');
	long		n;
	char	   *end;

	if (colon == NULL || colon == lit)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type genie_ngram_query: \"%s\"", lit),
				 errdetail("The form is n:string, for example 3:kitten.")));
	errno = 0;
	n = strtol(lit, &end, 10);
	if (end != colon || errno != 0 || n < 1 || n > GENIE_NGRAM_MAX_N)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type genie_ngram_query: \"%s\"", lit),
				 errdetail("n must be an integer between 1 and %d.", GENIE_NGRAM_MAX_N)));
	PG_RETURN_POINTER(make_query(colon + 1, strlen(colon + 1), (int) n));
}

Datum
genie_ngram_query_out(PG_FUNCTION_ARGS)
{
	GenieNgramQuery *q = PG_GETARG_NGRAM_QUERY_P(0);

	PG_RETURN_CSTRING(psprintf("%d:%.*s", q->n, (int) GENIE_NGRAM_QUERY_LEN(q), q->str));
}

/* genie_ngrams(string, n) */
Datum
genie_ngrams_query(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);

	PG_RETURN_POINTER(make_query(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), PG_GETARG_INT32(1)));
}

/* support function 3: genie_ngram_ops(n = ...) */
Datum
genie_ngram_options(PG_FUNCTION_ARGS)
{
	local_relopts *relopts = (local_relopts *) PG_GETARG_POINTER(0);

	init_local_reloptions(relopts, sizeof(NgramOptions));
	add_local_int_reloption(relopts, "n", "characters per gram",
							GENIE_NGRAM_DEFAULT_N, 1, GENIE_NGRAM_MAX_N,
							offsetof(NgramOptions, n));
	PG_RETURN_VOID();
}

static int
index_n(FunctionCallInfo fcinfo)
{
	if (PG_HAS_OPCLASS_OPTIONS())
		return ((NgramOptions *) PG_GET_OPCLASS_OPTIONS())->n;
	return GENIE_NGRAM_DEFAULT_N;
}

/* a genie index of this operator class? */
bool
genie_is_ngram_index(Relation index)
{
	return genie_is_genie_index(index) &&
		index_getprocinfo(index, 1, GENIE_KEYWORDS_PROC)->fn_addr == genie_ngram_keywords_proc;
}

/* the n of such an index */
int
genie_ngram_index_n(Relation index)
{
	bytea	  **opts = RelationGetIndexAttOptions(index, false);

	if (opts != NULL && opts[0] != NULL)
		return ((NgramOptions *) opts[0])->n;
	return GENIE_NGRAM_DEFAULT_N;
}

/* can an n-gram index answer a query of this strategy?  (true for other classes) */
bool
genie_ngram_query_fits(Relation index, int strategy, Datum query)
{
	int			qn = GENIE_NGRAM_DEFAULT_N;

	if (!genie_is_ngram_index(index))
		return true;
	if (strategy == STRATEGY_QUERY)
		qn = ((GenieNgramQuery *) DatumGetPointer(PG_DETOAST_DATUM(query)))->n;
	return qn == genie_ngram_index_n(index);
}

static uint64 *
text_keywords(text *t, int n, uint32 *nkeys)
{
	return genie_text_ngram_keywords(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), n, nkeys);
}

/* support function 1: (text, internal nkeys) */
Datum
genie_ngram_keywords_proc(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(text_keywords(PG_GETARG_TEXT_PP(0), index_n(fcinfo),
									(uint32 *) PG_GETARG_POINTER(1)));
}

/* support function 2: (text or genie_ngram_query, internal nitems, int2 strategy) */
Datum
genie_ngram_query_proc(PG_FUNCTION_ARGS)
{
	uint32	   *nkeys = (uint32 *) PG_GETARG_POINTER(1);
	uint64	   *keys;
	int			strategy = PG_GETARG_INT16(2);
	int			n = index_n(fcinfo);
	const char *s;
	Size		len;
	int			qn;

	if (strategy == STRATEGY_QUERY)
	{
		GenieNgramQuery *q = PG_GETARG_NGRAM_QUERY_P(0);

		s = q->str;
		len = GENIE_NGRAM_QUERY_LEN(q);
		qn = q->n;
	}
	else
	{
		text	   *t = PG_GETARG_TEXT_PP(0);

		s = VARDATA_ANY(t);
		len = VARSIZE_ANY_EXHDR(t);
		qn = GENIE_NGRAM_DEFAULT_N;
	}
	if (qn != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query counts grams of %d characters, the index grams of %d", qn, n),
				 errhint("Order by col <%%> genie_ngrams(query, %d).", n)));
	keys = genie_text_ngram_keywords(s, len, n, nkeys);
	PG_RETURN_POINTER(genie_items_of_keys(keys, *nkeys));
}

static Datum
ngram_distance(text *row, const char *s, Size len, int n)
{
	uint32		na,
				nb;
	uint64	   *ka = text_keywords(row, n, &na);
	uint64	   *kb = genie_text_ngram_keywords(s, len, n, &nb);

	PG_RETURN_FLOAT8(-(double) genie_count_common(ka, na, kb, nb));
}

/* text <%> text: minus the shared (gram, occurrence) keywords, n = 3 */
Datum
genie_ngram_distance(PG_FUNCTION_ARGS)
{
	text	   *q = PG_GETARG_TEXT_PP(1);

	return ngram_distance(PG_GETARG_TEXT_PP(0), VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q),
						  GENIE_NGRAM_DEFAULT_N);
}

/* text <%> genie_ngram_query: the same with the query's n */
Datum
genie_ngram_query_distance(PG_FUNCTION_ARGS)
{
	GenieNgramQuery *q = PG_GETARG_NGRAM_QUERY_P(1);

	return ngram_distance(PG_GETARG_TEXT_PP(0), q->str, GENIE_NGRAM_QUERY_LEN(q), q->n);
}
