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
 * jobs (a build that failed half-way) unless it asks to keep them
 * (GI_REQ_KMEANS_KEEP: a pq build's codebooks beside its lists' job).
 *
 * A job runs on the device whose stores hold the fewest bytes when it
 * begins.  Training runs on a thread of its own, so that the service goes
 * on answering other requests meanwhile: TRAIN starts the thread and the
 * request is carried from round to round until the thread is done (one
 * training at a time; a second TRAIN, and an ASSIGN on the training's
 * device, wait their turn the same way).  The training asks between its
 * steps whether its build still waits for it, and stops when the build
 * gave up (a cancelled CREATE INDEX, statement_timeout) or the service
 * leaves.  The thread touches only the job's samples and centroids and
 * the compute backend; it takes no PostgreSQL lock or memory and gets no
 * signal but a fault's.
 */
#include "postgres.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
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

	/* the training thread: started by TRAIN, joined by reap_training */
	bool		training;		/* a thread runs, not joined yet */
	pthread_t	thread;
	pg_atomic_uint32 done;		/* the thread's last store */
	pg_atomic_uint32 stop;		/* the service asks it to stop */
	GiSlot	   *slot;			/* the TRAIN request's slot, and when the */
	uint64		slot_taken;		/* service took it (rargs.t_taken) */
	gi_status	status;			/* the thread's result, once done */
	uint32		produced;
	char		errmsg[GI_ERRMSG_LEN];
	bool		failed;			/* joined with status != GI_OK */
	bool		orphan;			/* freed while training: out of gi_jobs */
} GiKmeansJob;

static GiKmeansJob **gi_jobs = NULL;
static int	gi_njobs = 0;
static int	gi_jobs_cap = 0;
static uint64 gi_next_job = 1;
static TimestampTz gi_last_purge = 0;

/* the job whose thread trains, or NULL (one at a time) */
static GiKmeansJob *gi_training = NULL;

static GiKmeansJob *reap_training(void);
static void drop_job(GiKmeansJob *job);

static bool
device_has_jobs(int device)
{
	for (int i = 0; i < gi_njobs; i++)
		if (gi_jobs[i]->device == device)
			return true;
	return false;
}

/* free a job that is out of gi_jobs and has no thread */
static void
job_release(GiKmeansJob *j)
{
	if (j->samples)
		pfree(j->samples);
	if (j->centroids)
		pfree(j->centroids);
	if (gi_ops && gi_ops->kmeans_release && !device_has_jobs(j->device) &&
		(gi_training == NULL || gi_training->device != j->device))
		gi_ops->kmeans_release(gi_devices[j->device].dev);
	pfree(j);
}

static void
job_free(int i)
{
	GiKmeansJob *j = gi_jobs[i];

	gi_jobs[i] = gi_jobs[--gi_njobs];
	if (j == gi_training)
	{
		/*
		 * Its thread still reads the samples: it is told to stop, and the
		 * job goes once the thread is reaped (gi_kmeans_maintain).
		 */
		pg_atomic_write_u32(&j->stop, 1);
		j->orphan = true;
		return;
	}
	job_release(j);
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

bool
gi_kmeans_training(void)
{
	return gi_training != NULL;
}

static void
log_stopped(const GiKmeansJob *job)
{
	ereport(LOG,
			(errmsg("gpuindex device service: stopped the k-means training of %u samples: its build gave up",
					job->nsamples)));
}

void
gi_kmeans_maintain(void)
{
	GiKmeansJob *job = reap_training();

	/*
	 * A training stopped because its build gave up, or whose job was freed
	 * meanwhile, has no request left to answer: its job goes here.
	 */
	if (job != NULL && job->failed && job->status == GI_ERR_CANCELLED)
		log_stopped(job);
	if (job != NULL && job->orphan)
		job_release(job);
	else if (job != NULL && job->failed && job->status == GI_ERR_CANCELLED)
		drop_job(job);
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

/*
 * A backend failure (errmsg: the backend's message): device trouble falls
 * back, anything else is an error.
 */
static void
reply_failure(GiWork *w, GiKmeansJob *job, gi_status st, const char *what,
			  const char *errmsg)
{
	if (st == GI_ERR_DEVICE)
		gi_service_restart_pending = true;
	if (st == GI_ERR_NOMEM || st == GI_ERR_DEVICE || st == GI_ERR_LIMIT ||
		st == GI_ERR_UNSUPPORTED)
	{
		reply_unsupported(w, "%s on the %s backend failed: %s", what, gi_ops->name,
						  errmsg);
		drop_job(job);
		return;
	}
	gi_reply_error(w, ERRCODE_INTERNAL_ERROR, "gpuindex %s backend: %s failed: %s",
				   gi_ops->name, what, errmsg);
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
	purge_jobs((a->flags & GI_REQ_KMEANS_KEEP) ? 0 : w->slot->pid);

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

/*
 * kmeans_train's keep_going (on the training thread, or on the service's
 * when no thread starts): the service does not ask it to stop, and the
 * TRAIN request is still the one its backend waits for (a slot given up on
 * is soon reused: the time the service took the request tells).
 */
static bool
train_wanted(void *arg)
{
	GiKmeansJob *job = arg;
	GiSlot	   *slot = job->slot;
	bool		waits;

	if (pg_atomic_read_u32(&job->stop) != 0)
		return false;
	SpinLockAcquire(&slot->mutex);
	waits = slot->state == GI_SLOT_RUNNING && slot->rargs.t_taken == job->slot_taken;
	SpinLockRelease(&slot->mutex);
	return waits;
}

static void *
train_main(void *arg)
{
	GiKmeansJob *job = arg;
	uint32		k = 0;
	gi_status	st;

#ifdef SCHED_BATCH
	{
		/* a long computation: the service's own thread comes first */
		struct sched_param sp;

		memset(&sp, 0, sizeof(sp));
		(void) pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	}
#endif
	gi_device_background_thread();
	st = gi_ops->kmeans_train(&job->params, job->nsamples, job->samples,
							  job->centroids, &k);
	job->status = st;
	job->produced = k;
	if (st != GI_OK)
		strlcpy(job->errmsg, gi_ops->last_error(), sizeof(job->errmsg));
	(void) pg_atomic_exchange_u32(&job->done, 1);
	return NULL;
}

/* a training's result into its job: trained, or failed with a status */
static void
record_training(GiKmeansJob *job)
{
	job->training = false;
	job->activity = GetCurrentTimestamp();
	if (job->status == GI_OK && job->produced > job->params.nlists)
	{
		snprintf(job->errmsg, sizeof(job->errmsg), "k-means produced %u centroids of %u",
				 job->produced, job->params.nlists);
		job->status = GI_ERR_INVALID;
	}
	if (job->status != GI_OK)
	{
		job->failed = true;
		return;
	}
	pfree(job->samples);
	job->samples = NULL;
	job->k = job->produced;
	job->trained = true;
}

/* the job whose training thread is done, joined and recorded; or NULL */
static GiKmeansJob *
reap_training(void)
{
	GiKmeansJob *job = gi_training;

	if (job == NULL || pg_atomic_read_u32(&job->done) == 0)
		return NULL;
	(void) pthread_join(job->thread, NULL);
	gi_training = NULL;
	record_training(job);
	return job;
}

/* the service leaves: a training still running stops at its next step */
static void
stop_training_at_exit(int code, Datum arg)
{
	GiKmeansJob *job = gi_training;

	if (job == NULL)
		return;
	pg_atomic_write_u32(&job->stop, 1);

	/*
	 * Not joined when it does not end soon: after a fault the thread that
	 * faulted never returns, and the exit ends it with the process.
	 */
	for (int i = 0; i < 2000 && pg_atomic_read_u32(&job->done) == 0; i++)
		pg_usleep(1000L);
	if (pg_atomic_read_u32(&job->done) != 0)
		(void) pthread_join(job->thread, NULL);
	gi_training = NULL;
}

/* start job's training on a thread of its own; false when none starts */
static bool
start_training(GiKmeansJob *job)
{
	static bool exit_hook = false;
	sigset_t	sigs;
	sigset_t	old;
	int			rc;

	if (!exit_hook)
	{
		before_shmem_exit(stop_training_at_exit, (Datum) 0);
		exit_hook = true;
	}
	/* the thread gets no signal but the faults its own code may raise */
	sigfillset(&sigs);
	sigdelset(&sigs, SIGSEGV);
	sigdelset(&sigs, SIGBUS);
	sigdelset(&sigs, SIGILL);
	sigdelset(&sigs, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &sigs, &old);
	rc = pthread_create(&job->thread, NULL, train_main, job);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		ereport(LOG,
				(errmsg("gpuindex device service: no thread for k-means training (%s); training in the service",
						strerror(rc))));
		return false;
	}
	job->training = true;
	gi_training = job;
	return true;
}

/* answer TRAIN from its job's recorded result */
static void
answer_training(GiWork *w, GiKmeansJob *job)
{
	if (job->failed && job->status == GI_ERR_CANCELLED)
	{
		log_stopped(job);
		gi_reply_error(w, ERRCODE_QUERY_CANCELED, "k-means training stopped: the build gave up");
		drop_job(job);
		return;
	}
	if (job->failed)
	{
		reply_failure(w, job, job->status, "k-means training", job->errmsg);
		return;
	}
	w->slot->rargs.count = job->k;
	gi_reply(w, GI_REPLY_OK);
}

static void
handle_train(GiWork *w)
{
	GiKmeansJob *job = find_job(w);

	if (job == NULL)
		return;
	if (job->training)
	{
		(void) reap_training();
		if (job->training)
		{
			w->carry = true;	/* still training: look again next round */
			return;
		}
	}
	if (job->failed || (job->trained && w->kept))
	{
		answer_training(w, job);
		return;
	}
	if (job->trained || job->received != job->nsamples)
	{
		malformed(w, "k-means training");
		return;
	}
	if (gi_training != NULL)
	{
		w->carry = true;		/* another training runs: wait for it */
		return;
	}
	job->slot = w->slot;
	job->slot_taken = w->slot->rargs.t_taken;
	pg_atomic_init_u32(&job->done, 0);
	pg_atomic_init_u32(&job->stop, 0);
	job->params.keep_going = train_wanted;
	job->params.keep_going_arg = job;
	if (start_training(job))
	{
		w->carry = true;
		return;
	}

	/* no thread: train here, while the other requests wait */
	job->status = gi_ops->kmeans_train(&job->params, job->nsamples, job->samples,
									   job->centroids, &job->produced);
	job->params.keep_going = NULL;
	if (job->status != GI_OK)
		strlcpy(job->errmsg, gi_ops->last_error(), sizeof(job->errmsg));
	record_training(job);
	answer_training(w, job);
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
	if (gi_training != NULL && gi_training->device == job->device)
	{
		/* the backend's k-means entries serve one caller per device */
		w->carry = true;
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
		reply_failure(w, job, st, "k-means assignment", gi_ops->last_error());
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
