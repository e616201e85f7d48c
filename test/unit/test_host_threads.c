/*
 * test_host_threads.c
 *		cmocka tests of the host backend's threads (host_pool.c) and of the
 *		searches and k-means that run on them.
 *
 * The pool: every task once, worker numbers in range, the failed task's
 * status and message back on the calling thread, nested calls, a changed
 * thread count, a forked child, signals blocked in the helpers.  The
 * kinds and k-means: the answers with 1 thread and with several are
 * byte for byte the same, for shapes that take every path (whole queries,
 * a query's lists split in parts, huge k, ties, NaN, zero vectors, keys
 * owning several records).  That the answers are right is what
 * test_host_store.c and test_host_sparse.c check against brute force;
 * `make run` runs them again with GI_TEST_THREADS set.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "gi_kind_sparse.h"
#include "host_pool.h"
#include "host_store.h"
#include "test_util.h"

static const gi_backend_ops *ops;

/* one thread, and the default grain: what a call did before threads */
static void
single_thread(void)
{
	ops->set_host_threads(1);
	gi_host_pool_set_grain(UINT64_C(1) << 18);
}

/* n threads, used by every call however small */
static void
threads(uint32_t n)
{
	ops->set_host_threads(n);
	gi_host_pool_set_grain(0);
}

/* ---- the pool ----------------------------------------------------------- */

typedef struct count_job
{
	uint32_t   *runs;			/* per task */
	uint32_t	max_worker;		/* highest worker number seen (atomic) */
	uint32_t	fail_task;		/* this task fails (UINT32_MAX: none) */
	uint32_t	spin;			/* busy loop a task, to let helpers join */
	uint32_t	workers_seen;	/* bit per worker number below 32 (atomic) */
	bool		signals_blocked;	/* every helper task saw them blocked */
} count_job;

static gi_status
count_task(void *arg, uint32_t task, uint32_t worker)
{
	count_job  *job = arg;
	volatile uint32_t sink = 0;
	uint32_t	seen;

	__atomic_fetch_add(&job->runs[task], 1, __ATOMIC_RELAXED);
	seen = __atomic_load_n(&job->max_worker, __ATOMIC_RELAXED);
	while (worker > seen &&
		   !__atomic_compare_exchange_n(&job->max_worker, &seen, worker, false,
										__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if (worker < 32)
		__atomic_fetch_or(&job->workers_seen, 1u << worker, __ATOMIC_RELAXED);
	if (worker > 0)
	{
		sigset_t	set;

		pthread_sigmask(SIG_BLOCK, NULL, &set);
		if (!sigismember(&set, SIGINT) || !sigismember(&set, SIGTERM) ||
			!sigismember(&set, SIGUSR1) || !sigismember(&set, SIGALRM))
			job->signals_blocked = false;
	}
	for (uint32_t i = 0; i < job->spin; i++)
		sink += i;
	if (task == job->fail_task)
	{
		gi_host_set_error("task %u failed", task);
		return GI_ERR_NOMEM;
	}
	return GI_OK;
}

/* run ntasks counting tasks on max_workers; every task ran exactly once */
static count_job
run_counted(uint32_t ntasks, uint32_t max_workers, uint32_t spin)
{
	count_job	job;
	uint32_t	t;

	memset(&job, 0, sizeof(job));
	job.runs = calloc(ntasks + 1, sizeof(uint32_t));
	assert_non_null(job.runs);
	job.fail_task = UINT32_MAX;
	job.spin = spin;
	job.signals_blocked = true;
	assert_int_equal(gi_host_pool_run(ntasks, max_workers, count_task, &job), GI_OK);
	for (t = 0; t < ntasks; t++)
		if (job.runs[t] != 1)
			fail_msg("task %u ran %u times", t, job.runs[t]);
	free(job.runs);
	job.runs = NULL;
	return job;
}

static void
test_pool_tasks(void **state)
{
	count_job	job;
	uint32_t	both = 0;

	(void) state;
	threads(4);
	assert_int_equal(gi_host_pool_threads(), 4);
	job = run_counted(1000, 8, 0);
	assert_true(job.max_worker < 4);
	job = run_counted(1000, 2, 0);
	assert_true(job.max_worker < 2);
	job = run_counted(3, 8, 0);
	assert_true(job.max_worker < 3);
	job = run_counted(0, 8, 0);
	job = run_counted(1, 8, 0);
	assert_int_equal(job.max_worker, 0);

	/* helpers do join (tasks long enough for them to wake), signals blocked */
	for (int i = 0; i < 50 && (both & ~1u) == 0; i++)
	{
		job = run_counted(64, 4, 200000);
		assert_true(job.signals_blocked);
		both |= job.workers_seen;
	}
	assert_true((both & ~1u) != 0);

	/* one thread: everything on the caller */
	single_thread();
	assert_int_equal(gi_host_pool_threads(), 1);
	job = run_counted(100, 8, 0);
	assert_int_equal(job.max_worker, 0);

	/* 0: one per online CPU, capped */
	ops->set_host_threads(0);
	assert_true(gi_host_pool_threads() >= 1 &&
				gi_host_pool_threads() <= GI_HOST_POOL_AUTO_MAX);
	ops->set_host_threads(100000);
	assert_int_equal(gi_host_pool_threads(), GI_HOST_POOL_MAX);
	single_thread();
}

/* the failed task's status and message come back on the calling thread */
static void
test_pool_error(void **state)
{
	uint32_t	n;

	(void) state;
	for (n = 1; n <= 5; n += 2)
	{
		count_job	job;

		threads(n);
		memset(&job, 0, sizeof(job));
		job.runs = calloc(200, sizeof(uint32_t));
		assert_non_null(job.runs);
		job.fail_task = 137;
		job.spin = 1000;
		gi_host_set_error("nothing yet");
		assert_int_equal(gi_host_pool_run(200, n, count_task, &job), GI_ERR_NOMEM);
		assert_string_equal(gi_host_last_error(), "task 137 failed");
		for (uint32_t t = 0; t < 200; t++)
			assert_true(job.runs[t] <= 1);
		free(job.runs);

		/* and the next call is clean */
		job = run_counted(300, n, 0);
	}
	single_thread();
}

static gi_status
nested_task(void *arg, uint32_t task, uint32_t worker)
{
	count_job  *inner = arg;

	(void) worker;
	/* a call from inside a task runs on that task's thread, worker 0 */
	return gi_host_pool_run(10, 8, count_task, &inner[task]);
}

static void
test_pool_nested(void **state)
{
	count_job	inner[16];
	uint32_t	i;

	(void) state;
	threads(3);
	memset(inner, 0, sizeof(inner));
	for (i = 0; i < 16; i++)
	{
		inner[i].runs = calloc(10, sizeof(uint32_t));
		assert_non_null(inner[i].runs);
		inner[i].fail_task = UINT32_MAX;
	}
	assert_int_equal(gi_host_pool_run(16, 3, nested_task, inner), GI_OK);
	for (i = 0; i < 16; i++)
	{
		for (uint32_t t = 0; t < 10; t++)
			assert_int_equal(inner[i].runs[t], 1);
		assert_int_equal(inner[i].max_worker, 0);
		free(inner[i].runs);
	}
	single_thread();
}

/* the thread count changes between calls, up and down and back */
static void
test_pool_resize(void **state)
{
	static const uint32_t sizes[] = {2, 5, 3, 1, 6, 2};
	uint32_t	i;

	(void) state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
	{
		count_job	job;

		threads(sizes[i]);
		job = run_counted(500, 64, 100);
		assert_true(job.max_worker < sizes[i]);
	}
	single_thread();
}

/* tasks of gi_host_pool_run_each wait here until all of them have started */
typedef struct meet_job
{
	uint32_t	ntasks;
	uint32_t	started;		/* atomic */
	uint32_t	met;			/* tasks that saw every other start (atomic) */
	uint32_t	workers_seen;	/* bit per worker (atomic) */
	uint32_t	fail_task;
} meet_job;

static gi_status
meet_task(void *arg, uint32_t task, uint32_t worker)
{
	meet_job   *job = arg;
	struct timespec ts = {0, 1000000};

	__atomic_fetch_add(&job->started, 1, __ATOMIC_ACQ_REL);
	if (worker < 32)
		__atomic_fetch_or(&job->workers_seen, 1u << worker, __ATOMIC_RELAXED);
	for (int i = 0; i < 10000; i++)
	{
		if (__atomic_load_n(&job->started, __ATOMIC_ACQUIRE) >= job->ntasks)
		{
			__atomic_fetch_add(&job->met, 1, __ATOMIC_RELAXED);
			break;
		}
		nanosleep(&ts, NULL);
	}
	if (task == job->fail_task)
	{
		gi_host_set_error("task %u failed", task);
		return GI_ERR_DEVICE;
	}
	return GI_OK;
}

/*
 * run_each: every task on a worker of its own at the same time, whatever
 * the thread setting (a task waits until all have started, which only
 * they running together can do); the setting still bounds the next
 * ordinary call.
 */
static void
test_pool_each(void **state)
{
	static const uint32_t setting[] = {1, 2, 1, 5};
	count_job	cj;

	(void) state;
	for (uint32_t i = 0; i < sizeof(setting) / sizeof(setting[0]); i++)
	{
		meet_job	job;

		threads(setting[i]);
		memset(&job, 0, sizeof(job));
		job.ntasks = 4;
		job.fail_task = i == 2 ? 3 : UINT32_MAX;
		if (i == 2)
			assert_int_equal(gi_host_pool_run_each(4, meet_task, &job), GI_ERR_DEVICE);
		else
			assert_int_equal(gi_host_pool_run_each(4, meet_task, &job), GI_OK);
		assert_int_equal(job.started, 4);
		assert_int_equal(job.met, 4);
		assert_int_equal(job.workers_seen, 0xFu);

		cj = run_counted(300, 64, 100);
		assert_true(cj.max_worker < setting[i]);
	}

	/* one task, or inside a task: on the calling thread */
	{
		meet_job	job;

		memset(&job, 0, sizeof(job));
		job.ntasks = 1;
		job.fail_task = UINT32_MAX;
		assert_int_equal(gi_host_pool_run_each(1, meet_task, &job), GI_OK);
		assert_int_equal(job.workers_seen, 1u);
	}
	single_thread();
}

/* a child forked from a process with helpers starts its own */
static void
test_pool_fork(void **state)
{
	pid_t		pid;
	int			status;

	(void) state;
	threads(3);
	(void) run_counted(200, 3, 1000);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
	{
		count_job	job;
		uint32_t	t;

		alarm(60);				/* a hang fails the test */
		memset(&job, 0, sizeof(job));
		job.runs = calloc(200, sizeof(uint32_t));
		job.fail_task = UINT32_MAX;
		if (gi_host_pool_run(200, 3, count_task, &job) != GI_OK)
			_exit(2);
		for (t = 0; t < 200; t++)
			if (job.runs[t] != 1)
				_exit(3);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	(void) run_counted(200, 3, 1000);
	single_thread();
}

/* ---- IVF: 1 thread and n threads give the same bytes --------------------- */

static void
random_vec(float *v, uint32_t dim)
{
	for (uint32_t j = 0; j < dim; j++)
		v[j] = rng_float();
}

typedef struct ivf_case
{
	gi_store   *store;
	uint32_t	dim;
	uint32_t	nlists;
	float	   *centroids;
} ivf_case;

/* a store of n records in nlists lists, with the awkward records every test wants */
static ivf_case
ivf_case_new(uint32_t n, uint32_t dim, uint32_t nlists, gi_key_mode mode)
{
	ivf_case	c;
	gi_store_params p;
	float	   *vecs = malloc(sizeof(float) * n * dim);
	uint32_t   *lists = malloc(sizeof(uint32_t) * n);
	uint64_t   *keys = malloc(sizeof(uint64_t) * n);
	uint64_t   *dead = malloc(sizeof(uint64_t) * n);
	uint32_t	ndead = 0;
	uint32_t	i;

	assert_non_null(vecs);
	assert_non_null(lists);
	assert_non_null(keys);
	assert_non_null(dead);
	c.dim = dim;
	c.nlists = nlists;
	c.centroids = malloc(sizeof(float) * nlists * dim);
	assert_non_null(c.centroids);
	for (i = 0; i < nlists; i++)
		random_vec(c.centroids + (size_t) i * dim, dim);
	for (i = 0; i < n; i++)
	{
		random_vec(vecs + (size_t) i * dim, dim);
		/* uneven lists: a third of the records in the first few */
		lists[i] = rng_below(3) == 0 ? rng_below(4 < nlists ? 4 : nlists) : rng_below(nlists);
		keys[i] = gi_tid_to_key((i * 7919u) % n, (uint16_t) (i % 5));
		if (i % 11 == 0)
			dead[ndead++] = keys[i];
	}
	/* exact ties under other keys; zero vectors; a NaN; a key owning three */
	for (i = 1; i <= 8 && i < n; i++)
		memcpy(vecs + (size_t) (n - i) * dim, vecs, sizeof(float) * dim);
	for (i = 20; i < 24 && i < n; i++)
		memset(vecs + (size_t) i * dim, 0, sizeof(float) * dim);
	if (n > 30)
	{
		vecs[(size_t) 30 * dim] = NAN;
		if (mode == GI_KEYS_ANY)
			keys[31] = keys[32] = keys[33];
	}

	memset(&p, 0, sizeof(p));
	p.nlists = nlists;
	p.record_bytes = dim * 4;
	p.chunk_slabs = 16;
	p.key_mode = mode;
	assert_int_equal(ops->store_create(&p, &c.store), GI_OK);
	assert_int_equal(ops->store_insert(c.store, n, lists, keys, vecs, NULL), GI_OK);
	assert_int_equal(ops->store_delete(c.store, ndead, dead, NULL), GI_OK);
	free(vecs);
	free(lists);
	free(keys);
	free(dead);
	return c;
}

static void
ivf_case_free(ivf_case *c)
{
	ops->store_destroy(c->store);
	free(c->centroids);
}

/* the search with the current threads; hits and found allocated */
static void
ivf_run(const ivf_case *c, gi_metric metric, uint32_t nq, const float *queries,
		uint32_t probes, uint32_t k, gi_hit **hits, uint32_t **found)
{
	*hits = calloc((size_t) nq * k + 1, sizeof(gi_hit));
	*found = calloc(nq + 1, sizeof(uint32_t));
	assert_non_null(*hits);
	assert_non_null(*found);
	if (gi_host_ivf_search(c->store, c->centroids, c->dim, metric, nq, queries,
						   probes, k, *hits, *found) != GI_OK)
		fail_msg("ivf search: %s", ops->last_error());
}

static void
expect_ivf_same(const ivf_case *c, gi_metric metric, uint32_t nq,
				const float *queries, uint32_t probes, uint32_t k)
{
	static const uint32_t counts[] = {2, 3, 8};
	gi_hit	   *h1;
	uint32_t   *f1;

	single_thread();
	ivf_run(c, metric, nq, queries, probes, k, &h1, &f1);
	/* a batch (scanned list by list) answers as its queries one at a time */
	for (uint32_t q = 0; nq > 1 && q < nq; q++)
	{
		gi_hit	   *ho;
		uint32_t   *fo;

		ivf_run(c, metric, 1, queries + (size_t) q * c->dim, probes, k, &ho, &fo);
		if (fo[0] != f1[q] || memcmp(ho, h1 + (size_t) q * k, sizeof(gi_hit) * k) != 0)
			fail_msg("metric %d nq %u probes %u k %u: query %u alone answers otherwise",
					 metric, nq, probes, k, q);
		free(ho);
		free(fo);
	}
	for (uint32_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
	{
		gi_hit	   *hn;
		uint32_t   *fn;

		threads(counts[i]);
		ivf_run(c, metric, nq, queries, probes, k, &hn, &fn);
		if (memcmp(f1, fn, sizeof(uint32_t) * nq) != 0 ||
			memcmp(h1, hn, sizeof(gi_hit) * nq * k) != 0)
			fail_msg("metric %d nq %u probes %u k %u: %u threads answer otherwise",
					 metric, nq, probes, k, counts[i]);
		free(hn);
		free(fn);
	}
	single_thread();
	free(h1);
	free(f1);
}

static void
test_ivf_threads(void **state)
{
	enum
	{
		DIM = 9, NL = 23, N = 4000, NQ = 70
	};
	static const uint32_t nqs[] = {1, 2, 5, NQ};
	static const uint32_t probes[] = {1, 4, NL};
	static const uint32_t ks[] = {1, 10, 300, 2 * N};
	float	   *queries = malloc(sizeof(float) * NQ * DIM);

	(void) state;
	assert_non_null(queries);
	rng_seed(4242);
	for (int mode = 0; mode < 2; mode++)
	{
		ivf_case	c = ivf_case_new(N, DIM, NL, mode == 0 ? GI_KEYS_ANY : GI_KEYS_UNIQUE);

		for (uint32_t i = 0; i < NQ; i++)
			random_vec(queries + (size_t) i * DIM, DIM);
		memset(queries + DIM, 0, sizeof(float) * DIM);	/* a zero query */
		memcpy(queries + 2 * DIM, c.centroids, sizeof(float) * DIM);

		for (int m = 0; m < 3; m++)
			for (uint32_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
				for (uint32_t b = 0; b < sizeof(probes) / sizeof(probes[0]); b++)
					for (uint32_t d = 0; d < sizeof(ks) / sizeof(ks[0]); d++)
						expect_ivf_same(&c, (gi_metric) m, nqs[a], queries, probes[b], ks[d]);
		ivf_case_free(&c);
	}

	/* an empty store, and one smaller than k */
	{
		ivf_case	c = ivf_case_new(40, DIM, NL, GI_KEYS_UNIQUE);
		ivf_case	e = ivf_case_new(0, DIM, NL, GI_KEYS_UNIQUE);

		expect_ivf_same(&c, GI_METRIC_L2, 3, queries, NL, 100);
		expect_ivf_same(&e, GI_METRIC_L2, 3, queries, 5, 10);
		ivf_case_free(&c);
		ivf_case_free(&e);
	}
	free(queries);
}

/* ---- sparse: 1 thread and n threads give the same bytes ------------------ */

static void
test_sparse_threads(void **state)
{
	enum
	{
		DIM = 300, NDOC = 3000, NQ = 40, MAXNNZ = 30
	};
	static const uint32_t nqs[] = {1, 3, NQ};
	static const uint32_t ks[] = {1, 10, 5000};
	static const uint32_t counts[] = {2, 3, 8};
	gi_store_params p;
	gi_sparse_state st;
	gi_sparse_search_params sp;
	gi_store   *s;
	uint32_t   *lists = malloc(sizeof(uint32_t) * NDOC * MAXNNZ);
	uint64_t   *keys = malloc(sizeof(uint64_t) * NDOC * MAXNNZ);
	float	   *weights = malloc(sizeof(float) * NDOC * MAXNNZ);
	unsigned char *queries = malloc(NQ * gi_sparse_query_bytes(MAXNNZ));
	size_t		qoff[NQ + 1];
	uint32_t	nrec = 0;
	uint32_t	i;

	(void) state;
	assert_non_null(lists);
	assert_non_null(keys);
	assert_non_null(weights);
	assert_non_null(queries);
	rng_seed(99);
	memset(&p, 0, sizeof(p));
	p.nlists = DIM;
	p.record_bytes = sizeof(float);
	p.chunk_slabs = 8;
	p.key_mode = GI_KEYS_PER_LIST;
	assert_int_equal(ops->store_create(&p, &s), GI_OK);
	st.dim = DIM;
	st.terms = 0;
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->set_state(s, &st, sizeof(st)), GI_OK);
	for (i = 0; i < NDOC; i++)
	{
		uint32_t	nnz = 1 + rng_below(MAXNNZ);

		for (uint32_t j = 0; j < nnz; j++)
		{
			/* skewed terms; repeated terms are skipped by the key mode */
			lists[nrec] = rng_below(1 + rng_below(DIM));
			keys[nrec] = gi_tid_to_key(i, 1);
			/* few distinct weights: many tied scores */
			weights[nrec] = (float) (1 + rng_below(4)) * (rng_below(5) == 0 ? -0.5f : 0.5f);
			nrec++;
		}
	}
	assert_int_equal(ops->store_insert(s, nrec, lists, keys, weights, NULL), GI_OK);
	for (i = 0; i < NDOC; i += 13)
	{
		uint64_t	key = gi_tid_to_key(i, 1);

		assert_int_equal(ops->store_delete(s, 1, &key, NULL), GI_OK);
	}

	qoff[0] = 0;
	for (i = 0; i < NQ; i++)
	{
		uint32_t	nnz = i == 1 ? 0 : 1 + rng_below(MAXNNZ);
		uint32_t	n = 0;
		uint32_t   *t = (uint32_t *) (queries + qoff[i] + sizeof(uint32_t));

		/* distinct ascending terms */
		for (uint32_t term = rng_below(5); term < DIM && n < nnz; term += 1 + rng_below(12))
			t[n++] = term;
		memcpy(queries + qoff[i], &n, sizeof(uint32_t));
		for (uint32_t j = 0; j < n; j++)
		{
			float		w = (float) (1 + rng_below(3));

			memcpy((float *) (t + n) + j, &w, sizeof(float));
		}
		qoff[i + 1] = qoff[i] + gi_sparse_query_bytes(n);
	}

	memset(&sp, 0, sizeof(sp));
	sp.dim = DIM;
	for (uint32_t a = 0; a < sizeof(nqs) / sizeof(nqs[0]); a++)
		for (uint32_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
		{
			uint32_t	nq = nqs[a];
			uint32_t	k = ks[b];
			gi_hit	   *h1 = calloc((size_t) nq * k, sizeof(gi_hit));
			uint32_t   *f1 = calloc(nq, sizeof(uint32_t));

			assert_non_null(h1);
			assert_non_null(f1);
			single_thread();
			if (ops->kinds[GI_KIND_SPARSE]->search(s, &sp, nq, queries, qoff[nq], k, h1, f1) != GI_OK)
				fail_msg("sparse search: %s", ops->last_error());
			for (uint32_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			{
				gi_hit	   *hn = calloc((size_t) nq * k, sizeof(gi_hit));
				uint32_t   *fn = calloc(nq, sizeof(uint32_t));

				assert_non_null(hn);
				assert_non_null(fn);
				threads(counts[c]);
				if (ops->kinds[GI_KIND_SPARSE]->search(s, &sp, nq, queries, qoff[nq], k, hn, fn) != GI_OK)
					fail_msg("sparse search: %s", ops->last_error());
				if (memcmp(f1, fn, sizeof(uint32_t) * nq) != 0 ||
					memcmp(h1, hn, sizeof(gi_hit) * nq * k) != 0)
					fail_msg("nq %u k %u: %u threads answer otherwise", nq, k, counts[c]);
				free(hn);
				free(fn);
			}
			free(h1);
			free(f1);
		}
	single_thread();
	ops->store_destroy(s);
	free(lists);
	free(keys);
	free(weights);
	free(queries);
}

/* ---- k-means: 1 thread and n threads give the same bytes ----------------- */

static int	km_polls;
static int	km_stop_after;

static bool
km_keep_going(void *arg)
{
	(void) arg;
	return ++km_polls <= km_stop_after;
}

static int	km_checks;

static void
km_check(void *arg)
{
	(void) arg;
	km_checks++;
}

/* train with the current threads; returns centroids produced */
static uint32_t
km_run(gi_metric metric, uint32_t n, uint32_t dim, uint32_t lists,
	   const float *samples, float *centroids, bool cancellable)
{
	gi_kmeans_params p;
	float	   *copy = malloc(sizeof(float) * n * dim + 1);
	void	   *ws = malloc(gi_host_kmeans_workspace(n, dim, lists));
	uint32_t	k;

	assert_non_null(copy);
	assert_non_null(ws);
	memcpy(copy, samples, sizeof(float) * n * dim);
	memset(&p, 0, sizeof(p));
	p.dim = dim;
	p.nlists = lists;
	p.iterations = 10;
	p.metric = metric;
	p.seed = 7;
	if (cancellable)
		p.keep_going = km_keep_going;
	memset(centroids, 0, sizeof(float) * lists * dim);
	km_checks = 0;
	k = gi_host_kmeans_train(&p, n, copy, centroids, ws, km_check, NULL);
	free(copy);
	free(ws);
	return k;
}

static void
test_kmeans_threads(void **state)
{
	enum
	{
		N = 5000, DIM = 10, LISTS = 37
	};
	static const uint32_t counts[] = {2, 3, 8};
	float	   *x = malloc(sizeof(float) * N * DIM);
	float	   *c1 = malloc(sizeof(float) * LISTS * DIM);
	float	   *cn = malloc(sizeof(float) * LISTS * DIM);
	uint32_t   *a1 = malloc(sizeof(uint32_t) * N);
	uint32_t   *an = malloc(sizeof(uint32_t) * N);

	(void) state;
	assert_non_null(x);
	assert_non_null(c1);
	assert_non_null(cn);
	assert_non_null(a1);
	assert_non_null(an);
	rng_seed(5);
	for (uint32_t i = 0; i < N; i++)
	{
		uint32_t	centre = rng_below(12);

		for (uint32_t j = 0; j < DIM; j++)
			x[i * DIM + j] = (float) ((centre * 7 + j) % 5) + rng_float() * 0.3f;
	}
	for (uint32_t i = 0; i < N; i += 17)
		memset(x + (size_t) i * DIM, 0, sizeof(float) * DIM);	/* dropped when spherical */

	for (int m = 0; m < 3; m++)
	{
		uint32_t	k1;
		int			checks1;

		single_thread();
		km_stop_after = 1 << 30;
		k1 = km_run((gi_metric) m, N, DIM, LISTS, x, c1, false);
		checks1 = km_checks;
		assert_int_equal(k1, LISTS);
		assert_true(checks1 > 0);
		assert_int_equal(gi_host_kmeans_assign(NULL, LISTS, DIM, (gi_metric) m, c1, N, x, a1),
						 GI_OK);
		for (uint32_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		{
			threads(counts[c]);
			assert_int_equal(km_run((gi_metric) m, N, DIM, LISTS, x, cn, false), k1);
			assert_memory_equal(c1, cn, sizeof(float) * LISTS * DIM);
			assert_true(km_checks > 0);
			assert_int_equal(gi_host_kmeans_assign(NULL, LISTS, DIM, (gi_metric) m, cn, N, x,
												   an), GI_OK);
			assert_memory_equal(a1, an, sizeof(uint32_t) * N);

			/* stopped by keep_going, in the seeding and in the iterations */
			km_polls = 0;
			km_stop_after = 5;
			assert_int_equal(km_run((gi_metric) m, N, DIM, LISTS, x, cn, true), 0);
			assert_int_equal(km_polls, 6);
			km_polls = 0;
			km_stop_after = LISTS + 3;
			assert_int_equal(km_run((gi_metric) m, N, DIM, LISTS, x, cn, true), 0);
			assert_int_equal(km_polls, LISTS + 4);
		}
	}
	single_thread();
	free(x);
	free(c1);
	free(cn);
	free(a1);
	free(an);
}

/*
 * The list the access method places a row in, on 1, 2, 3 and 8 threads:
 * each row's list is the nearest centroid by a brute force in double (up
 * to float rounding), the lowest of two equal centroids, and the same on
 * every thread count and row by row.
 */
static void
test_nearest_lists_threads(void **state)
{
	enum
	{
		N = 3000, DIM = 27, LISTS = 50
	};
	static const uint32_t counts[] = {1, 2, 3, 8};
	float	   *x = malloc(sizeof(float) * N * DIM);
	float	   *c = malloc(sizeof(float) * LISTS * DIM);
	float	   *cnorms = malloc(sizeof(float) * LISTS);
	uint32_t   *a1 = malloc(sizeof(uint32_t) * N);
	uint32_t   *an = malloc(sizeof(uint32_t) * N);

	(void) state;
	assert_non_null(x);
	assert_non_null(c);
	assert_non_null(cnorms);
	assert_non_null(a1);
	assert_non_null(an);
	rng_seed(9);
	for (uint32_t i = 0; i < N * DIM; i++)
		x[i] = rng_float() * 2.0f - 1.0f;
	for (uint32_t i = 0; i < LISTS * DIM; i++)
		c[i] = rng_float() * 2.0f - 1.0f;
	memcpy(c + 7 * DIM, c + 3 * DIM, sizeof(float) * DIM);	/* list 7 ties list 3 */
	memset(c + 11 * DIM, 0, sizeof(float) * DIM);	/* a zero centroid */
	memcpy(x + 5 * DIM, c + 3 * DIM, sizeof(float) * DIM);	/* a row on the tie */
	for (uint32_t l = 0; l < LISTS; l++)
	{
		double		n = 0;

		for (uint32_t j = 0; j < DIM; j++)
			n += (double) c[l * DIM + j] * c[l * DIM + j];
		cnorms[l] = (float) sqrt(n);
	}

	for (int m = 0; m < 3; m++)
	{
		single_thread();
		gi_host_nearest_lists(c, cnorms, LISTS, DIM, (gi_metric) m, N, x, a1);
		for (uint32_t i = 0; i < N; i++)
		{
			const float *v = x + (size_t) i * DIM;
			double		best = INFINITY;
			double		got = 0;

			for (uint32_t l = 0; l < LISTS; l++)
			{
				double		d = 0,
							dot = 0;

				for (uint32_t j = 0; j < DIM; j++)
				{
					double		e = (double) v[j] - c[l * DIM + j];

					d += e * e;
					dot += (double) v[j] * c[l * DIM + j];
				}
				if (m == GI_METRIC_IP)
					d = -dot;
				else if (m == GI_METRIC_COSINE)
					d = cnorms[l] > 0 ? -dot / cnorms[l] : INFINITY;
				if (d < best)
					best = d;
				if (l == a1[i])
					got = d;
			}
			if (got > best + 1e-4)
				fail_msg("metric %d row %u: list %u at %g, the nearest at %g",
						 m, i, a1[i], got, best);
			assert_int_equal(a1[i], gi_host_nearest_list(c, cnorms, LISTS, DIM,
														 (gi_metric) m, v));
		}
		if (m != GI_METRIC_IP)
			assert_int_equal(a1[5], 3);	/* a row on two equal centroids */
		for (uint32_t t = 0; t < sizeof(counts) / sizeof(counts[0]); t++)
		{
			threads(counts[t]);
			memset(an, 0xff, sizeof(uint32_t) * N);
			gi_host_nearest_lists(c, cnorms, LISTS, DIM, (gi_metric) m, N, x, an);
			assert_memory_equal(a1, an, sizeof(uint32_t) * N);
		}
	}
	single_thread();
	free(x);
	free(c);
	free(cnorms);
	free(a1);
	free(an);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_tasks),
		cmocka_unit_test(test_pool_error),
		cmocka_unit_test(test_pool_nested),
		cmocka_unit_test(test_pool_resize),
		cmocka_unit_test(test_pool_each),
		cmocka_unit_test(test_pool_fork),
		cmocka_unit_test(test_ivf_threads),
		cmocka_unit_test(test_sparse_threads),
		cmocka_unit_test(test_kmeans_threads),
		cmocka_unit_test(test_nearest_lists_threads),
	};

	ops = gi_host_backend();
	return cmocka_run_group_tests_name("host_threads", tests, NULL, NULL);
}
