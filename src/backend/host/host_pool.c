/*
 * host_pool.c
 *		The host backend's worker threads (host_pool.h): one mutex, two
 *		condition variables, tasks handed out by an atomic counter.
 *
 * The helpers are started by the first call that can use them and sleep
 * on a condition variable between calls.  A call publishes its task
 * function under the mutex and wakes them; a helper that wakes while the
 * call is still open takes the next worker number and joins it.  The
 * caller works through the tasks too, then closes the call and waits only
 * for the helpers that joined, so a helper slow to wake never delays a
 * call that was over without it.  A changed thread count stops and joins
 * the helpers before the next call and starts the new number; a process
 * forked from one with helpers (they stay with the parent) starts its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* SCHED_BATCH */
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_pool.h"
#include "host_store.h"

/* below this many multiply-adds a call stays on the calling thread */
#define GI_HOST_POOL_GRAIN	(UINT64_C(1) << 18)

/* set in the task counter when a task failed: no task starts after */
#define GI_POOL_STOP		UINT32_C(0x80000000)

typedef struct gi_host_pool
{
	pthread_mutex_t mutex;
	pthread_cond_t wake;		/* helpers: a call came, or stop */
	pthread_cond_t idle;		/* the caller: the last helper left */
	pthread_t  *threads;
	uint32_t	nthreads;		/* helpers running */
	uint32_t	short_of;		/* helpers last asked for when not all
								 * could start (not asked again) */
	pid_t		pid;			/* the process the helpers run in */
	bool		stop;

	/* the current call */
	uint64_t	call;			/* counts calls */
	bool		open;			/* helpers may still join it */
	uint32_t	joined;			/* worker numbers given out */
	uint32_t	workers;		/* at most this many */
	uint32_t	active;			/* helpers inside the call */
	gi_host_task_fn fn;
	void	   *arg;
	uint32_t	ntasks;
	uint32_t	next;			/* next task (atomic), GI_POOL_STOP set
								 * once one failed */
	uint32_t	err_task;
	gi_status	err_status;
	char		err_msg[512];
} gi_host_pool;

static gi_host_pool gi_pool = {
	.mutex = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
};

static uint32_t gi_pool_setting = 0;	/* gi_host_pool_set_threads (atomic) */
static uint32_t gi_pool_online = 0; /* online CPUs, once known */
static uint64_t gi_pool_grain = GI_HOST_POOL_GRAIN;
static bool gi_pool_busy = false;	/* a call is running (atomic) */
static __thread bool gi_pool_in_task = false;
static __thread bool gi_pool_alone = false;	/* gi_host_pool_set_alone */

void
gi_host_pool_set_threads(uint32_t n)
{
	__atomic_store_n(&gi_pool_setting, n, __ATOMIC_RELAXED);
}

uint32_t
gi_host_pool_threads(void)
{
	uint32_t	n = __atomic_load_n(&gi_pool_setting, __ATOMIC_RELAXED);

	if (n == 0)
	{
		n = __atomic_load_n(&gi_pool_online, __ATOMIC_RELAXED);
		if (n == 0)
		{
			long		cpus = sysconf(_SC_NPROCESSORS_ONLN);

			n = cpus < 1 ? 1 : cpus > GI_HOST_POOL_AUTO_MAX ?
				GI_HOST_POOL_AUTO_MAX : (uint32_t) cpus;
			__atomic_store_n(&gi_pool_online, n, __ATOMIC_RELAXED);
		}
	}
	return n > GI_HOST_POOL_MAX ? GI_HOST_POOL_MAX : n;
}

bool
gi_host_pool_worth(uint64_t work)
{
	return work >= gi_pool_grain;
}

void
gi_host_pool_set_grain(uint64_t work)
{
	gi_pool_grain = work;
}

/* take tasks until none is left or one failed */
static void
gi_pool_work(uint32_t worker)
{
	gi_host_pool *p = &gi_pool;

	for (;;)
	{
		uint32_t	t = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
		gi_status	st;

		if (t >= p->ntasks)
			break;
		st = p->fn(p->arg, t, worker);
		if (st == GI_OK)
			continue;
		pthread_mutex_lock(&p->mutex);
		if (t < p->err_task)
		{
			p->err_task = t;
			p->err_status = st;
			snprintf(p->err_msg, sizeof(p->err_msg), "%s", gi_host_last_error());
		}
		pthread_mutex_unlock(&p->mutex);
		__atomic_fetch_or(&p->next, GI_POOL_STOP, __ATOMIC_RELAXED);
	}
}

/* a helper, started between calls: `started` is the last call before it */
static void *
gi_pool_helper(void *started)
{
	gi_host_pool *p = &gi_pool;
	uint64_t	seen = (uint64_t) (uintptr_t) started;

	gi_pool_in_task = true;
#ifdef SCHED_BATCH
	{
		/*
		 * A batch thread (Linux): it uses idle cores but never preempts a
		 * session's process when it wakes, so sessions keep their latency
		 * while a large search keeps the service busy.
		 */
		struct sched_param sp;

		memset(&sp, 0, sizeof(sp));
		(void) pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	}
#endif
	pthread_mutex_lock(&p->mutex);
	for (;;)
	{
		uint32_t	worker;

		while (!p->stop && (p->call == seen || !p->open || p->joined >= p->workers))
		{
			seen = p->call;		/* a call over or full: wait for the next */
			pthread_cond_wait(&p->wake, &p->mutex);
		}
		if (p->stop)
			break;
		seen = p->call;
		worker = p->joined++;
		p->active++;
		pthread_mutex_unlock(&p->mutex);

		gi_pool_work(worker);

		pthread_mutex_lock(&p->mutex);
		if (--p->active == 0)
			pthread_cond_signal(&p->idle);
	}
	pthread_mutex_unlock(&p->mutex);
	return NULL;
}

static void
gi_pool_stop(void)
{
	gi_host_pool *p = &gi_pool;
	uint32_t	i;

	pthread_mutex_lock(&p->mutex);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mutex);
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	p->threads = NULL;
	p->nthreads = 0;
	p->stop = false;
}

/*
 * Have `helpers` helpers running (fewer when the system refuses more);
 * called between calls only.
 */
static void
gi_pool_ensure(uint32_t helpers)
{
	gi_host_pool *p = &gi_pool;
	pid_t		pid = getpid();
	sigset_t	all;
	sigset_t	old;

	if (p->pid != pid)
	{
		/* a new process: any helpers and held locks stayed in the parent */
		free(p->threads);
		p->threads = NULL;
		p->nthreads = 0;
		p->short_of = 0;
		p->stop = false;
		pthread_mutex_init(&p->mutex, NULL);
		pthread_cond_init(&p->wake, NULL);
		pthread_cond_init(&p->idle, NULL);
		p->pid = pid;
	}
	if (helpers == p->nthreads || helpers == p->short_of)
		return;
	if (p->nthreads > 0)
		gi_pool_stop();
	p->short_of = 0;
	if (helpers == 0)
		return;
	p->threads = malloc(sizeof(pthread_t) * helpers);
	if (p->threads == NULL)
	{
		p->short_of = helpers;
		return;
	}

	/*
	 * Signals are the server's business: the helpers never take one, except
	 * a fault of their own, which goes to the process's handler as it would
	 * on the calling thread (a blocked fault signal kills the process).
	 */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (p->nthreads < helpers &&
		   pthread_create(&p->threads[p->nthreads], NULL, gi_pool_helper,
						  (void *) (uintptr_t) p->call) == 0)
		p->nthreads++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->nthreads < helpers)
		p->short_of = helpers;
}

static gi_status
gi_pool_run_inline(uint32_t ntasks, gi_host_task_fn fn, void *arg)
{
	uint32_t	t;

	for (t = 0; t < ntasks; t++)
	{
		gi_status	st = fn(arg, t, 0);

		if (st != GI_OK)
			return st;
	}
	return GI_OK;
}

/*
 * Run the tasks on `workers` workers, with at least `helpers` helpers
 * running (helpers beyond that, started for an earlier call, stay idle).
 */
static gi_status
gi_pool_run_parallel(uint32_t ntasks, uint32_t workers, uint32_t helpers,
					 gi_host_task_fn fn, void *arg)
{
	gi_host_pool *p = &gi_pool;
	gi_status	st;

	if (p->pid != getpid() || p->nthreads < helpers)
		gi_pool_ensure(helpers);
	if (p->nthreads == 0)
		return gi_pool_run_inline(ntasks, fn, arg);
	if (workers > p->nthreads + 1)
		workers = p->nthreads + 1;

	pthread_mutex_lock(&p->mutex);
	p->fn = fn;
	p->arg = arg;
	p->ntasks = ntasks;
	p->next = 0;
	p->err_task = UINT32_MAX;
	p->err_status = GI_OK;
	p->workers = workers;
	p->joined = 1;				/* worker 0: this thread */
	p->active = 0;
	p->open = true;
	p->call++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mutex);

	gi_pool_in_task = true;
	gi_pool_work(0);
	gi_pool_in_task = false;

	pthread_mutex_lock(&p->mutex);
	p->open = false;
	while (p->active > 0)
		pthread_cond_wait(&p->idle, &p->mutex);
	st = p->err_status;
	if (st != GI_OK)
		gi_host_set_error("%s", p->err_msg);
	pthread_mutex_unlock(&p->mutex);
	return st;
}

void
gi_host_pool_set_alone(bool alone)
{
	gi_pool_alone = alone;
}

gi_status
gi_host_pool_run(uint32_t ntasks, uint32_t max_workers, gi_host_task_fn fn, void *arg)
{
	uint32_t	workers = gi_host_pool_threads();
	gi_status	st;

	if (workers > max_workers)
		workers = max_workers;
	if (workers > ntasks)
		workers = ntasks;
	if (workers <= 1 || gi_pool_in_task || gi_pool_alone || ntasks >= GI_POOL_STOP ||
		__atomic_exchange_n(&gi_pool_busy, true, __ATOMIC_ACQUIRE))
		return gi_pool_run_inline(ntasks, fn, arg);
	st = gi_pool_run_parallel(ntasks, workers, gi_host_pool_threads() - 1, fn, arg);
	__atomic_store_n(&gi_pool_busy, false, __ATOMIC_RELEASE);
	return st;
}

gi_status
gi_host_pool_run_each(uint32_t ntasks, gi_host_task_fn fn, void *arg)
{
	uint32_t	workers = ntasks < GI_HOST_POOL_MAX ? ntasks : GI_HOST_POOL_MAX;
	gi_status	st;

	if (workers <= 1 || gi_pool_in_task || gi_pool_alone || ntasks >= GI_POOL_STOP ||
		__atomic_exchange_n(&gi_pool_busy, true, __ATOMIC_ACQUIRE))
		return gi_pool_run_inline(ntasks, fn, arg);
	st = gi_pool_run_parallel(ntasks, workers, workers - 1, fn, arg);
	__atomic_store_n(&gi_pool_busy, false, __ATOMIC_RELEASE);
	return st;
}

/* the debug fault's task: worker 0 waits for a helper, which faults */
static volatile int gi_pool_fault_target = 0;
static volatile bool gi_pool_fault_joined = false;

static gi_status
gi_pool_fault_task(void *arg, uint32_t task, uint32_t worker)
{
	(void) arg;
	(void) task;
	if (worker != 0)
	{
		gi_pool_fault_joined = true;
		/* an invalid write, as a bug in a task would make */
		*(volatile int *) (uintptr_t) gi_pool_fault_target = 1;
		return GI_OK;
	}
	for (int i = 0; i < 2000 && !gi_pool_fault_joined; i++)
		usleep(1000);
	return GI_OK;
}

gi_status
gi_host_pool_debug_fault(void)
{
	gi_status	st;

	if (gi_host_pool_threads() < 2)
	{
		gi_host_set_error("the injected thread fault needs gpuindex.host_threads of 2 or more");
		return GI_ERR_UNSUPPORTED;
	}
	gi_pool_fault_joined = false;
	st = gi_host_pool_run(2, 2, gi_pool_fault_task, NULL);
	if (st == GI_OK)
	{
		gi_host_set_error("no helper thread took the injected thread fault");
		st = GI_ERR_UNSUPPORTED;
	}
	return st;
}
