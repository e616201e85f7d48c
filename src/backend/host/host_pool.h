/*
 * host_pool.h
 *		The host backend's worker threads: the tasks of one call run on the
 *		calling thread and on a set of pthreads kept for the process.
 *
 * The host backend runs inside PostgreSQL processes (the device service,
 * a backend building an index), so the threads block every signal but
 * their own faults, are started on first use (never in the postmaster,
 * which forks), call nothing of PostgreSQL and run only task functions of
 * the host backend.
 * A task reports failure as a gi_status with its message set the usual
 * way (gi_host_set_error); the call returns the status of the failed task
 * with the lowest number, its message moved to the calling thread.
 *
 * One call at a time: a call made while another is running (from a task,
 * or from a second thread) runs its tasks on its own thread, in order.
 * Plain C, no PostgreSQL headers.
 */
#ifndef GI_HOST_POOL_H
#define GI_HOST_POOL_H

#include "gi_backend.h"

/* threads chosen by 0 ("automatic"): the online CPUs, at most this many */
#define GI_HOST_POOL_AUTO_MAX	32

/* threads a setting may ask for */
#define GI_HOST_POOL_MAX		256

/*
 * Scratch the threads of one call may hold beyond the calling thread's: a
 * call that would need more uses fewer threads.
 */
#define GI_HOST_POOL_SCRATCH	((size_t) 256 << 20)

/*
 * One task: `worker` is in [0, the call's workers) and no two tasks run
 * on the same worker at once, so it indexes per-worker scratch.
 */
typedef gi_status (*gi_host_task_fn) (void *arg, uint32_t task, uint32_t worker);

/*
 * Threads the calls of this process may use, the calling thread included
 * (0: one per online CPU, at most GI_HOST_POOL_AUTO_MAX; 1: the calling
 * thread alone).  Takes effect at the next call; cheap, never blocks.
 */
extern void gi_host_pool_set_threads(uint32_t n);

/* threads a call may use now, >= 1 */
extern uint32_t gi_host_pool_threads(void);

/*
 * Make the calling thread's calls run on itself alone (a background job
 * that leaves the helpers, and the other cores, to the others), or not.
 */
extern void gi_host_pool_set_alone(bool alone);

/*
 * Whether work of this size (about one multiply-add a unit) is worth
 * waking threads for; below it a call runs on the calling thread alone.
 */
extern bool gi_host_pool_worth(uint64_t work);

/*
 * Run fn for tasks 0 .. ntasks-1 on at most max_workers workers (worker 0
 * is the calling thread), each task once, in no particular order; return
 * when all are done.  After a failure, tasks not yet started are skipped.
 */
extern gi_status gi_host_pool_run(uint32_t ntasks, uint32_t max_workers,
								  gi_host_task_fn fn, void *arg);

/*
 * The same with a worker for every task (at most GI_HOST_POOL_MAX) whatever
 * the thread setting: for tasks that mostly wait for a device, not for a
 * core.  Helpers started beyond the setting are kept for later calls.
 */
extern gi_status gi_host_pool_run_each(uint32_t ntasks, gi_host_task_fn fn, void *arg);

/*
 * Test hook: the work below which calls stay on the calling thread
 * (0: none, every call with several tasks uses the threads).
 */
extern void gi_host_pool_set_grain(uint64_t work);

/*
 * Test hook: a helper thread makes an invalid write (the process's fault
 * handler decides what follows); returns only when it cannot, with the
 * reason set.
 */
extern gi_status gi_host_pool_debug_fault(void);

#endif							/* GI_HOST_POOL_H */
