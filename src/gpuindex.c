/*
 * gpuindex.c
 *		Module entry: GUCs, the device service's registration, the store
 *		kinds it knows, and the hook that forgets the device store of a
 *		dropped index.
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "genie.h"
#include "gpuivf.h"
#include "gpusparse.h"
#include "gi_client.h"
#include "gi_device.h"
#include "gi_kind.h"
#include "gi_service.h"
#include "gi_shmem.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

int			gi_device_choice = GI_DEVICE_AUTO;
int			gi_devices_wanted = 0;
int			gi_memory_limit_mb = 0;
int			gi_batch_linger_us = 0;
int			gi_service_spin_us = 50;
int			gi_service_overlap = GI_OVERLAP_AUTO;
int			gi_client_spin_us = -1;
int			gi_search_slice_ms = 1;
int			gi_role_memory_limit_mb = 0;
int			gi_host_threads = 0;
bool		gi_debug_service_kmeans = false;
int			gi_debug_collect_pause_pid = 0;

static const struct config_enum_entry device_options[] = {
	{"auto", GI_DEVICE_AUTO, false},
	{"cpu", GI_DEVICE_CPU, false},
	{"host", GI_DEVICE_CPU, true},
	{"cuda", GI_DEVICE_CUDA, false},
	{"gpu", GI_DEVICE_CUDA, true},
	{NULL, 0, false}
};

static const struct config_enum_entry overlap_options[] = {
	{"auto", GI_OVERLAP_AUTO, false},
	{"off", GI_OVERLAP_OFF, false},
	{"on", GI_OVERLAP_ON, false},
	{NULL, 0, false}
};

/* index access methods whose indexes have a device store */
static const char *const gi_am_names[] = {"gpuivf", "gpusparse", "genie"};

static object_access_hook_type prev_object_access_hook = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * A pgvector habit: a '[1,2,3]' literal where a real[] is wanted fails in
 * PostgreSQL's array input, which knows nothing of vectors; add a hint.
 */
static void
gi_emit_log(ErrorData *edata)
{
	if (edata->elevel >= ERROR && edata->hint == NULL &&
		edata->sqlerrcode == ERRCODE_INVALID_TEXT_REPRESENTATION &&
		edata->message != NULL &&
		strncmp(edata->message, "malformed array literal: \"[", 27) == 0)
		edata->hint = MemoryContextStrdup(ErrorContext,
										  "real[] literals use braces, as in '{1,2,3}'; for pgvector's '[1,2,3]' keep a vector column and index it through the gpuindex_pgvector extension.");
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

static bool
is_gpuindex_index(Oid relid)
{
	HeapTuple	tup;
	Form_pg_class cls;
	bool		ours = false;

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return false;
	cls = (Form_pg_class) GETSTRUCT(tup);
	if (cls->relkind == RELKIND_INDEX && OidIsValid(cls->relam))
	{
		char	   *amname = get_am_name(cls->relam);

		for (int i = 0; amname && i < lengthof(gi_am_names); i++)
			if (strcmp(amname, gi_am_names[i]) == 0)
				ours = true;
	}
	ReleaseSysCache(tup);
	return ours;
}

/*
 * DROP INDEX / DROP TABLE: free the device store now.  Should the drop roll
 * back, the index simply reloads from its pages on next use.
 */
static void
gi_object_access(ObjectAccessType access, Oid classId, Oid objectId,
				 int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && classId == RelationRelationId && subId == 0 &&
		gi_shared != NULL && is_gpuindex_index(objectId))
	{
		GiStoreKey	key;

		key.dbid = MyDatabaseId;
		key.relid = objectId;
		key.part = 0;
		(void) gi_call_simple(GI_REQ_DROP, &key, NULL, NULL);
	}
	else if (access == OAT_DROP && classId == DatabaseRelationId && gi_shared != NULL)
	{
		/* every store of the database: a later one may get its OID */
		GiStoreKey	key;

		key.dbid = objectId;
		key.relid = InvalidOid;
		key.part = 0;
		(void) gi_call_simple(GI_REQ_DROP, &key, NULL, NULL);
	}
}

/* in every process: the service's searches and the k-means of builds */
static void
assign_host_threads(int newval, void *extra)
{
	gi_device_set_host_threads((uint32) newval);
}

static void
register_service(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	/*
	 * The service reads no catalogs, but a (database-less) connection puts
	 * it in pg_stat_activity and lets pg_terminate_backend reach it.
	 * Consistent state, not recovery end, so that standbys can search.
	 */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gpuindex");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gi_service_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gpuindex device service");
	snprintf(worker.bgw_type, BGW_MAXLEN, "gpuindex device service");
	RegisterBackgroundWorker(&worker);
}

void
_PG_init(void)
{
	DefineCustomEnumVariable("gpuindex.device",
							 "Compute backend of the gpuindex device service.",
							 "auto uses CUDA when a usable GPU and the CUDA backend are present, "
							 "else the host (CPU) backend; cpu forces the host backend; "
							 "cuda requires a GPU and fails store requests without one.",
							 &gi_device_choice,
							 GI_DEVICE_AUTO,
							 device_options,
	/* a POSTMASTER variable cannot be defined by a late load (CREATE EXTENSION) */
							 process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	/*
	 * More devices than the machine has (one GPU holding two, the host
	 * backend several) make a store's spreading testable on one device.
	 */
	DefineCustomIntVariable("gpuindex.devices",
							"Devices the gpuindex device service spreads every index store over (0: every device the compute backend offers).",
							"A number above 0 opens that many device objects over the backend's devices in turn, "
							"so that one GPU (or the host) can hold several of them.",
							&gi_devices_wanted,
							0, 0, GI_MAX_DEVICES,
							process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuindex.memory_limit",
							"Memory all gpuindex stores together may use, in megabytes (0: no limit).",
							"Inserts and loads that would pass it fail with an error (a small insert sent at "
							"commit drops the index's store instead); with the CUDA backend this is device memory.",
							&gi_memory_limit_mb,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuindex.search_slice_ms",
							"Milliseconds of work the device service gives a large batch search before serving other requests.",
							"A batch whose queries would take longer is searched a slice at a time, between "
							"other sessions' requests, and stops when its statement is cancelled; 0 serves "
							"every batch in one piece.",
							&gi_search_slice_ms,
							1, 0, 10000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuindex.role_memory_limit",
							"Memory the stores of the indexes one role owns may use together, in megabytes (0: no limit).",
							"Within gpuindex.memory_limit: inserts and loads of a role's indexes that would pass "
							"it fail with an error, so one role cannot take the stores' memory from others.",
							&gi_role_memory_limit_mb,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuindex.service_spin_us",
							"Microseconds the device service polls for new requests after a round before it sleeps.",
							"A request that arrives while it polls skips the service's wake-up (about 10 to 15 "
							"microseconds); polling keeps one core busy meanwhile.",
							&gi_service_spin_us,
							50, 0, 10000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("gpuindex.service_overlap",
							 "Whether the device service works while the device searches.",
							 "auto: where the compute backend searches asynchronously (CUDA) and a search merges "
							 "the requests of at least 8 sessions, the service wakes the sessions of the search "
							 "before and takes new requests while the device searches; off: every search is "
							 "waited for in its round; on: every search, also on the host backend (whose "
							 "searches run at once: only their answers wait; for tests).",
							 &gi_service_overlap,
							 GI_OVERLAP_AUTO,
							 overlap_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuindex.client_spin_us",
							"Microseconds a session polls for the device service's answer before it sleeps.",
							"An answer that comes while it polls skips the session's wake-up; polling keeps "
							"the session's core busy meanwhile.  -1: 100 when the service searches on a GPU, "
							"0 when it searches on the host's cores.",
							&gi_client_spin_us,
							-1, -1, 10000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuindex.batch_linger_us",
							"Microseconds the device service waits for more requests before answering a round.",
							"Larger batches at the cost of latency; 0 answers at once.",
							&gi_batch_linger_us,
							0, 0, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/*
	 * Reload, not restart: every process starts its threads on first use
	 * and resizes them between calls.  Not per session: the service's
	 * threads serve all of them, and a build's share the same cores.
	 */
	DefineCustomIntVariable("gpuindex.host_threads",
							"Threads the host backend may use in one process (0: one per online CPU, at most 32).",
							"The device service searches on them, CREATE INDEX trains its k-means on them "
							"and genie_seq_search verifies its candidates on them; "
							"1 uses the calling thread alone. Results do not depend on it.",
							&gi_host_threads,
							0, 0, 256,
							PGC_SIGHUP,
							0,
							NULL, assign_host_threads, NULL);

	/*
	 * Testing only: with the host backend, answer CREATE INDEX's k-means
	 * requests in the device service (as the CUDA backend does) instead of
	 * letting builds train in their own processes, so that a machine
	 * without a GPU exercises that path (test/scenarios).
	 */
	DefineCustomBoolVariable("gpuindex.debug_service_kmeans",
							 "Testing only: the host backend trains and assigns CREATE INDEX k-means in the device service.",
							 NULL,
							 &gi_debug_service_kmeans,
							 false,
							 process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	/*
	 * Testing only: once per value, the service pauses for
	 * GI_DEBUG_COLLECT_PAUSE_MS right after a pass over the slots that
	 * follows another looked at this backend's slot (t/009), so that a test
	 * can queue requests behind that pass.
	 */
	DefineCustomIntVariable("gpuindex.debug_collect_pause_pid",
							"Testing only: the device service pauses once after a later pass over its slots examined this backend's slot.",
							NULL,
							&gi_debug_collect_pause_pid,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("gpuindex.trace_stages",
							 "Search requests ask the compute backend for the times of its own stages (gpuindex_search_stages()).",
							 "The CUDA backend then waits for each stage to finish, so searches are slower while this is on.",
							 &gi_trace_stages,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	gi_scan_limit_init();

	MarkGUCPrefixReserved("gpuindex");

	prev_object_access_hook = object_access_hook;
	object_access_hook = gi_object_access;
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = gi_emit_log;

	if (process_shared_preload_libraries_in_progress)
	{
		gi_shmem_register();
		register_service();
	}

	gi_kind_register(&gi_kind_ivf);
	gi_kind_register(&gi_kind_ivfpq);
	gi_kind_register(&gi_kind_sparse);
	gpuivf_init();
	gpusparse_init();
	genie_init();
}
