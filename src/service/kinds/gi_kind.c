/*
 * gi_kind.c
 *		The registry of store kinds the device service knows.
 */
#include "postgres.h"

#include "gi_kind.h"

static const GiServiceKind *gi_kinds[GI_KIND_COUNT];

void
gi_kind_register(const GiServiceKind *kind)
{
	if (kind->kind <= GI_KIND_NONE || kind->kind >= GI_KIND_COUNT)
		elog(ERROR, "gpuindex store kind \"%s\" has number %d, out of range",
			 kind->name, (int) kind->kind);
	gi_kinds[kind->kind] = kind;
}

const GiServiceKind *
gi_kind_get(uint32 kind)
{
	return kind < GI_KIND_COUNT ? gi_kinds[kind] : NULL;
}

const void *
gi_kind_concat_queries(const GiKindSearch *reqs, int n, Size *query_bytes)
{
	Size		total = 0;
	char	   *queries;

	for (int i = 0; i < n; i++)
		total += reqs[i].query_bytes;
	*query_bytes = total;
	if (n == 1)
		return reqs[0].queries;

	queries = palloc_extended(Max(total, 1), MCXT_ALLOC_HUGE);
	total = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(queries + total, reqs[i].queries, reqs[i].query_bytes);
		total += reqs[i].query_bytes;
	}
	return queries;
}
