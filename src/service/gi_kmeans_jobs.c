/*
 * gi_kmeans_jobs.c
 *		k-means for CREATE INDEX inside the device service: training on the
 *		build's sample and assigning its rows, on the compute backend's
 *		kmeans_* entries (the CUDA module).
 *
 * A build is a job owned by the backend that runs it:
 *
 *	KMEANS_BEGIN	"do you train?"  UNSUPPORTED when the compute backend has
 *					no kmeans entries (the host backend: builds then train
 *					and assign in their own processes, in parallel, instead
 *					of queueing here), or when the sample does not fit in the
 *					service's memory.  Otherwise a job token.
 *	KMEANS_DATA		the sample, in chunks (offset, n vectors).
 *	KMEANS_TRAIN	runs kmeans_train; answers the number of centroids.
 *	KMEANS_RESULT	the centroids, in chunks.
 *	ASSIGN			n rows -> their nearest centroid (kmeans_assign), with
 *					the job's centroids; the build sends its rows in chunks.
 *	KMEANS_END		frees the job (and, when no job is left on its device,
 *					the backend's cached device memory: kmeans_release).
 *
 * A device failure (out of device memory, CUDA error) in TRAIN or ASSIGN
 * answers UNSUPPORTED with the reason in rargs.errmsg, and the build does
 * the rest itself on the CPU with a WARNING, so that a busy or broken GPU
 * never makes CREATE INDEX fail; an unknown job (the service restarted
 * meanwhile, or the job was purged) answers NO_JOB, with the same
 * fallback.  Jobs of backends that died, or silent for
 * GI_KMEANS_IDLE_MS, are purged; a backend's new BEGIN replaces its old
 * job (a build that failed half-way).
 *
 * A job runs on the device whose stores hold the fewest bytes when it
 * begins.  Training runs in the service's one thread: while it runs,
 * other requests wait for the next round.  It asks between its steps
 * whether the build still waits for it, and stops when the build gave up
 * (a cancelled CREATE INDEX, statement_timeout).
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gi_device.h"
#include "gi_kmeans_jobs.h"
#include "gi_service.h"
#include "gi_stores.h"

/* a job silent this long is dropped (its build fell back or died) */
#define GI_KMEANS_IDLE_MS	(10 * 60 * 1000)

/* bounds that keep sizes in range; the access method stays far below */
#define GI_KMEANS_MAX_DIM		65536
#define GI_KMEANS_MAX_ITERS		1000

typedef struct GiKmeansJob
{
	uint64		token;
	int			pid;			/* the building backend */
	int			device;			/* index in gi_devices */
	TimestampTz activity;
	gi_kmeans_params params;
	uint32		nsamples;
	uint64		received;		/* sample vectors received */
	float	   *samples;		/* nsamples * dim, freed after training */
	float	   *centroids;		/* nlists * dim once trained */
	uint32		k;				/* centroids produced */
	bool		trained;
} GiKmeansJob;

static GiKmeansJob **gi_jobs = NULL;
static int	gi_njobs = 0;
static int	gi_jobs_cap = 0;
static uint64 gi_next_job = 1;
static TimestampTz gi_last_purge = 0;

static bool
device_has_jobs(int device)
{
	for (int i = 0; i < gi_njobs; i++)
		if (gi_jobs[i]->device == device)
			return true;
	return false;
}

static void
job_free(int i)
{
	GiKmeansJob *j = gi_jobs[i];

	if (j->samples)
		pfree(j->samples);
	if (j->centroids)
		pfree(j->centroids);
	gi_jobs[i] = gi_jobs[--gi_njobs];
	if (gi_ops && gi_ops->kmeans_release && !device_has_jobs(j->device))
		gi_ops->kmeans_release(gi_devices[j->device].dev);
	pfree(j);
}

static bool
pid_alive(int pid)
{
	return pid != 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* drop jobs of dead backends, silent jobs, and (pid != 0) pid's own */
static void
purge_jobs(int pid)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < gi_njobs;)
	{
		GiKmeansJob *j = gi_jobs[i];

		if (j->pid == pid || !pid_alive(j->pid) ||
			TimestampDifferenceExceeds(j->activity, now, GI_KMEANS_IDLE_MS))
			job_free(i);
		else
			i++;
	}
	gi_last_purge = now;
}

void
gi_kmeans_maintain(void)
{
	if (gi_njobs > 0 &&
		TimestampDifferenceExceeds(gi_last_purge, GetCurrentTimestamp(), 1000))
		purge_jobs(0);
}

/* the job a request names, or NULL after answering NO_JOB */
static GiKmeansJob *
find_job(GiWork *w)
{
	for (int i = 0; i < gi_njobs; i++)
	{
		GiKmeansJob *j = gi_jobs[i];

		if (j->token == GI_KARGS(&w->slot->args, GiKmeansArgs)->job &&
			j->pid == w->slot->pid)
		{
			j->activity = GetCurrentTimestamp();
			return j;
		}
	}
	gi_reply(w, GI_REPLY_NO_JOB);
	return NULL;
}

static void
drop_job(GiKmeansJob *job)
{
	for (int i = 0; i < gi_njobs; i++)
		if (gi_jobs[i] == job)
		{
			job_free(i);
			return;
		}
}

static void
reply_unsupported(GiWork *w, const char *fmt,...) pg_attribute_printf(2, 3);

static void
reply_unsupported(GiWork *w, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(w->slot->rargs.errmsg, GI_ERRMSG_LEN, fmt, ap);
	va_end(ap);
	gi_reply(w, GI_REPLY_UNSUPPORTED);
}

static void
malformed(GiWork *w, const char *what)
{
	gi_reply_error(w, ERRCODE_PROTOCOL_VIOLATION, "malformed gpuindex %s request", what);
}

/* a backend failure: device trouble falls back, anything else is an error */
static void
reply_failure(GiWork *w, GiKmeansJob *job, gi_status st, const char *what)
{
	if (st == GI_ERR_DEVICE)
		gi_service_restart_pending = true;
	if (st == GI_ERR_NOMEM || st == GI_ERR_DEVICE || st == GI_ERR_LIMIT ||
		st == GI_ERR_UNSUPPORTED)
	{
		reply_unsupported(w, "%s on the %s backend failed: %s", what, gi_ops->name,
						  gi_ops->last_error());
		drop_job(job);
		return;
	}
	gi_reply_error(w, ERRCODE_INTERNAL_ERROR, "gpuindex %s backend: %s failed: %s",
				   gi_ops->name, what, gi_ops->last_error());
	drop_job(job);
}

static void
handle_begin(GiWork *w)
{
	GiReqArgs  *a = &w->slot->args;
	GiKmeansArgs *ka = GI_KARGS(a, GiKmeansArgs);
	GiKmeansJob *job;
	Size		bytes;

	if (gi_ops->kmeans_train == NULL || gi_ops->kmeans_assign == NULL)
	{
		gi_reply(w, GI_REPLY_UNSUPPORTED);
		return;
	}
	if (ka->dim == 0 || ka->dim > GI_KMEANS_MAX_DIM || ka->nlists == 0 || a->n == 0 ||
		ka->metric > GI_METRIC_COSINE || ka->iterations > GI_KMEANS_MAX_ITERS)
	{
		malformed(w, "k-means");
		return;
	}
	purge_jobs(w->slot->pid);

	bytes = (Size) a->n * ka->dim * sizeof(float);
	job = MemoryContextAllocZero(TopMemoryContext, sizeof(GiKmeansJob));
	job->samples = MemoryContextAllocExtended(TopMemoryContext, bytes,
											  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	job->centroids = MemoryContextAllocExtended(TopMemoryContext,
												(Size) ka->nlists * ka->dim * sizeof(float),
												MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (job->samples == NULL || job->centroids == NULL)
	{
		if (job->samples)
			pfree(job->samples);
		if (job->centroids)
			pfree(job->centroids);
		pfree(job);
		reply_unsupported(w, "the device service cannot hold %u samples of %u dimensions",
						  a->n, ka->dim);
		return;
	}
	if (gi_njobs == gi_jobs_cap)
	{
		int			cap = Max(8, gi_jobs_cap * 2);

		gi_jobs = gi_jobs ? repalloc(gi_jobs, sizeof(GiKmeansJob *) * cap)
			: MemoryContextAlloc(TopMemoryContext, sizeof(GiKmeansJob *) * cap);
		gi_jobs_cap = cap;
	}
	job->token = gi_next_job++;
	job->pid = w->slot->pid;
	job->activity = GetCurrentTimestamp();
	job->device = gi_stores_emptiest_device();
	job->params.dim = ka->dim;
	job->params.nlists = ka->nlists;
	job->params.iterations = ka->iterations;
	job->params.metric = ka->metric;
	job->params.seed = ka->seed;
	job->params.device = gi_devices[job->device].dev;
	job->nsamples = a->n;
	gi_jobs[gi_njobs++] = job;

	w->slot->rargs.token = job->token;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_data(GiWork *w)
{
	GiReqArgs  *a = &w->slot->args;
	GiKmeansArgs *ka = GI_KARGS(a, GiKmeansArgs);
	GiKmeansJob *job = find_job(w);
	Size		row = (Size) (job ? job->params.dim : 0) * sizeof(float);

	if (job == NULL)
		return;
	if (job->trained || ka->offset > job->nsamples || a->n > job->nsamples - ka->offset ||
		w->slot->in_size != (Size) a->n * row)
	{
		malformed(w, "k-means sample");
		return;
	}
	memcpy((char *) job->samples + ka->offset * row, w->buf, w->slot->in_size);
	job->received += a->n;
	gi_reply(w, GI_REPLY_OK);
}

/* kmeans_train's keep_going: the building backend still waits */
static bool
build_waits(void *arg)
{
	GiSlot	   *slot = arg;
	bool		waits;

	SpinLockAcquire(&slot->mutex);
	waits = slot->state == GI_SLOT_RUNNING;
	SpinLockRelease(&slot->mutex);
	return waits;
}

static void
handle_train(GiWork *w)
{
	GiKmeansJob *job = find_job(w);
	gi_status	st;
	uint32		k = 0;

	if (job == NULL)
		return;
	if (job->trained || job->received != job->nsamples)
	{
		malformed(w, "k-means training");
		return;
	}
	job->params.keep_going = build_waits;
	job->params.keep_going_arg = w->slot;
	st = gi_ops->kmeans_train(&job->params, job->nsamples, job->samples,
							  job->centroids, &k);
	job->params.keep_going = NULL;
	if (st == GI_ERR_CANCELLED)
	{
		ereport(LOG,
				(errmsg("gpuindex device service: stopped the k-means training of %u samples: its build gave up",
						job->nsamples)));
		gi_reply_error(w, ERRCODE_QUERY_CANCELED, "k-means training stopped: the build gave up");
		drop_job(job);
		return;
	}
	if (st != GI_OK)
	{
		reply_failure(w, job, st, "k-means training");
		return;
	}
	if (k > job->params.nlists)
	{
		gi_reply_error(w, ERRCODE_INTERNAL_ERROR,
					   "gpuindex %s backend: k-means produced %u centroids of %u",
					   gi_ops->name, k, job->params.nlists);
		drop_job(job);
		return;
	}
	pfree(job->samples);
	job->samples = NULL;
	job->k = k;
	job->trained = true;
	job->activity = GetCurrentTimestamp();
	w->slot->rargs.count = k;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_result(GiWork *w)
{
	GiReqArgs  *a = &w->slot->args;
	GiKmeansArgs *ka = GI_KARGS(a, GiKmeansArgs);
	GiKmeansJob *job = find_job(w);
	Size		need;

	if (job == NULL)
		return;
	if (!job->trained || ka->offset > job->k || a->n > job->k - ka->offset)
	{
		malformed(w, "k-means result");
		return;
	}
	need = (Size) a->n * job->params.dim * sizeof(float);
	if (need > w->slot->capacity)
	{
		w->slot->rargs.out_needed = need;
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return;
	}
	memcpy(w->buf, job->centroids + ka->offset * job->params.dim, need);
	w->slot->rargs.out_size = need;
	w->slot->rargs.count = a->n;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_assign(GiWork *w)
{
	GiReqArgs  *a = &w->slot->args;
	GiKmeansArgs *ka = GI_KARGS(a, GiKmeansArgs);
	GiKmeansJob *job = find_job(w);
	uint32	   *lists;
	gi_status	st;

	if (job == NULL)
		return;
	if (!job->trained || job->k == 0 || ka->dim != job->params.dim ||
		w->slot->in_size != (Size) a->n * ka->dim * sizeof(float))
	{
		malformed(w, "k-means assignment");
		return;
	}
	if ((Size) a->n * sizeof(uint32) > w->slot->capacity)
	{
		w->slot->rargs.out_needed = (Size) a->n * sizeof(uint32);
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return;
	}
	/* input and answer share the buffer: answer into a copy first */
	lists = palloc_extended(Max((Size) a->n, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	st = gi_ops->kmeans_assign(gi_devices[job->device].dev, job->k, job->params.dim,
							   (gi_metric) job->params.metric, job->centroids, a->n,
							   (const float *) w->buf, lists);
	if (st != GI_OK)
	{
		reply_failure(w, job, st, "k-means assignment");
		return;
	}
	for (uint32 i = 0; i < a->n; i++)
		if (lists[i] >= job->k)
		{
			gi_reply_error(w, ERRCODE_INTERNAL_ERROR,
						   "gpuindex %s backend: assignment to list %u of %u",
						   gi_ops->name, lists[i], job->k);
			drop_job(job);
			return;
		}
	memcpy(w->buf, lists, (Size) a->n * sizeof(uint32));
	w->slot->rargs.out_size = (Size) a->n * sizeof(uint32);
	w->slot->rargs.count = a->n;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_end(GiWork *w)
{
	for (int i = 0; i < gi_njobs; i++)
		if (gi_jobs[i]->token == GI_KARGS(&w->slot->args, GiKmeansArgs)->job &&
			gi_jobs[i]->pid == w->slot->pid)
		{
			job_free(i);
			break;
		}
	gi_reply(w, GI_REPLY_OK);
}

void
gi_kmeans_handle(GiWork *w)
{
	switch (w->slot->type)
	{
		case GI_REQ_KMEANS_BEGIN:
			handle_begin(w);
			break;
		case GI_REQ_KMEANS_DATA:
			handle_data(w);
			break;
		case GI_REQ_KMEANS_TRAIN:
			handle_train(w);
			break;
		case GI_REQ_KMEANS_RESULT:
			handle_result(w);
			break;
		case GI_REQ_ASSIGN:
			handle_assign(w);
			break;
		case GI_REQ_KMEANS_END:
			handle_end(w);
			break;
		default:
			elog(ERROR, "unexpected k-means request type %d", (int) w->slot->type);
	}
}
