/*
 * gi_standby.c
 *		Searches on a hot standby: the index's store follows WAL replay.
 *
 * A search there says which replay position its store must cover.  A
 * store behind it is brought forward by the backend that found it so:
 * when no WAL record from the store's position to the search's touched
 * the index's pages, the service is told the store covers the search's
 * position; otherwise the store is reloaded from the pages
 * (docs/architecture.md, "Hot standbys").
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "access/xlogutils.h"
#include "catalog/storage_xlog.h"

#include "gi_access.h"

/* LOAD_BEGIN's lsn_from: set while gi_standby_catch_up reloads */
XLogRecPtr	gi_load_replacing = InvalidXLogRecPtr;

/* the replay position a search must see on a hot standby; 0 elsewhere */
XLogRecPtr
gi_standby_position(void)
{
	if (!RecoveryInProgress())
		return InvalidXLogRecPtr;
	return GetXLogReplayRecPtr(NULL);
}

/* whether a decoded record changes the relation's files */
static bool
record_touches(XLogReaderState *reader, const RelFileNode *node)
{
	for (int block = 0; block <= XLogRecMaxBlockId(reader); block++)
	{
		RelFileNode rnode;

		if (XLogRecGetBlockTagExtended(reader, block, &rnode, NULL, NULL, NULL) &&
			RelFileNodeEquals(rnode, *node))
			return true;
	}
	if (XLogRecGetRmid(reader) == RM_SMGR_ID &&
		(XLogRecGetInfo(reader) & ~XLR_INFO_MASK) == XLOG_SMGR_TRUNCATE)
	{
		xl_smgr_truncate *xlrec = (xl_smgr_truncate *) XLogRecGetData(reader);

		return RelFileNodeEquals(xlrec->rnode, *node);
	}
	return false;
}

/*
 * Whether replayed WAL from `from` up to `to` changes the relation's
 * files.  True also when unsure: WAL no longer on this server (or about
 * to be recycled) is not read.
 */
static bool
wal_touches(const RelFileNode *node, XLogRecPtr from, XLogRecPtr to)
{
	ReadLocalXLogPageNoWaitPrivate *priv;
	XLogReaderState *reader;
	XLogSegNo	segno;
	XLogSegNo	removed = XLogGetLastRemovedSegno();
	XLogRecPtr	first;
	bool		touched = false;

	/* a segment at or next to the last one removed may go any moment */
	XLByteToSeg(from, segno, wal_segment_size);
	if (removed > 0 && segno <= removed + 1)
		return true;

	priv = palloc0(sizeof(ReadLocalXLogPageNoWaitPrivate));
	reader = XLogReaderAllocate(wal_segment_size, NULL,
								XL_ROUTINE(.page_read = &read_local_xlog_page_no_wait,
										   .segment_open = &wal_segment_open,
										   .segment_close = &wal_segment_close),
								priv);
	if (reader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed while allocating a WAL reading processor.")));

	first = XLogFindNextRecord(reader, from);
	if (XLogRecPtrIsInvalid(first))
		touched = true;
	while (!touched && reader->EndRecPtr < to)
	{
		char	   *errormsg;

		CHECK_FOR_INTERRUPTS();
		/* a record before `to` that cannot be read: unsure */
		if (XLogReadRecord(reader, &errormsg) == NULL)
			touched = true;
		else
			touched = record_touches(reader, node);
	}
	XLogReaderFree(reader);
	pfree(priv);
	return touched;
}

/*
 * The index's store on this standby covers replay up to `from` only, and a
 * search needs `to`: tell the service it covers `to`, or reload it.  True
 * when the search may be asked again, false when another backend reloads
 * it (the caller waits first).
 */
bool
gi_standby_catch_up(Relation index, XLogRecPtr from, XLogRecPtr to,
					GiLoadFn load)
{
	GiStoreKey	key = gi_store_key(index);
	GiReqArgs	args;
	bool		ready;

	if (from != InvalidXLogRecPtr && !wal_touches(&index->rd_node, from, to))
	{
		memset(&args, 0, sizeof(args));
		args.relfilenode = gi_store_relfilenode(index);
		args.lsn_from = from;
		args.lsn = to;
		(void) gi_call_simple(GI_REQ_SYNCED, &key, &args, NULL);
		return true;
	}
	gi_load_replacing = to;
	ready = load(index);
	gi_load_replacing = InvalidXLogRecPtr;
	return ready;
}
