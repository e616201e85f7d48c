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
