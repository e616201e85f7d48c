/*
 * gpuindex.c
 *		Module entry: GUCs and registration of the device service.
 */
#include "postgres.h"

#include "fmgr.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
}
