/*
 * gi_cuda_test.h
 *		Test hooks exported by gpuindex_cuda.so besides gi_cuda_backend().
 *
 * The device service never calls these; the GPU tests (test/gpu/) and the
 * store benchmark (bench/store/) find them with dlsym.  Plain C.
 */
#ifndef GI_CUDA_TEST_H
#define GI_CUDA_TEST_H

#include "gi_backend.h"

#ifdef __cplusplus
extern "C"
{
#endif

/*
 * Download the device structures and verify every invariant: the host
 * mirror's own (lists, free stacks, ATT, key chains, totals, as the host
 * store's gi_host_store_check does) and device == mirror (list heads and
 * counts, headers, bitmaps, ATT, free stack, per-slot keys and key ordinals
 * of the live rows, the ordinal -> key array, the free ordinals).
 * True when all hold; otherwise false with a description in err.
 */
typedef bool (*gi_cuda_store_check_fn) (gi_store *store, char *err, size_t errlen);
#define GI_CUDA_STORE_CHECK "gi_cuda_store_check"

/*
 * The live records of one list read back from the device by following the
 * device's own links and bitmaps: *n records, keys in *keys, packed
 * payloads in *payloads (both malloc'ed, caller frees; NULL when *n is 0).
 */
typedef gi_status (*gi_cuda_store_dump_fn) (gi_store *store, uint32_t list,
											uint64_t **keys, void **payloads,
											uint64_t *n);
#define GI_CUDA_STORE_DUMP "gi_cuda_store_dump"

/*
 * Concurrent mode (stress tests): one thread may search while another
 * inserts and deletes.  Deleted slots and emptied slabs are then held back
 * from reuse until the mode is switched off, which waits for nothing: the
 * caller must have stopped its searches first.
 */
typedef gi_status (*gi_cuda_store_set_concurrent_fn) (gi_store *store, bool on);
#define GI_CUDA_STORE_SET_CONCURRENT "gi_cuda_store_set_concurrent"

/*
 * Fault injection: after `after` more successful device allocations of
 * pool growth, one fails as cudaMalloc does when the device is full
 * (GI_ERR_NOMEM).  Negative disables.  Thread-local.
 */
typedef void (*gi_cuda_fail_alloc_after_fn) (int64_t after);
#define GI_CUDA_FAIL_ALLOC_AFTER "gi_cuda_fail_alloc_after"

/*
 * A real device fault: a kernel on the default device writes to an
 * address no allocation holds, which leaves the process's CUDA context
 * unusable (a sticky error).  Returns the status the failed
 * synchronisation maps to (GI_ERR_DEVICE) with its message.  The device
 * service's fault test calls it; nothing in this process can use the
 * device afterwards.
 */
typedef gi_status (*gi_cuda_debug_illegal_address_fn) (void);
#define GI_CUDA_DEBUG_ILLEGAL_ADDRESS "gi_cuda_debug_illegal_address"

/*
 * Records per pipelined insert chunk (0: the default, about 4 MiB of
 * payload); tests set it small so that every insert crosses chunks.
 */
typedef gi_status (*gi_cuda_store_set_insert_chunk_fn) (gi_store *store, uint32_t records);
#define GI_CUDA_STORE_SET_INSERT_CHUNK "gi_cuda_store_set_insert_chunk"

/*
 * How the IVF kind's scan of few queries and the IVF-PQ kind's scan find
 * the slabs of the probed lists: GI_CU_SCAN_AUTO (the slab directory,
 * rebuilt when stale; in concurrent mode the chain walk), GI_CU_SCAN_CHAINS (the
 * chain walk) or GI_CU_SCAN_DIR (the directory, rebuilt whenever stale).
 * Process-wide; tests compare the paths.
 */
#define GI_CU_SCAN_AUTO		0
#define GI_CU_SCAN_CHAINS	1
#define GI_CU_SCAN_DIR		2
typedef void (*gi_cuda_ivf_set_scan_fn) (int mode);
#define GI_CUDA_IVF_SET_SCAN "gi_cuda_ivf_set_scan"

/*
 * The IVF kind's directory scan of few queries: blocks_per_sm (1-8) blocks
 * an SM share a query's slabs, and ilp (16, 32, 64 or 128) words a lane loads
 * before their FMAs; anything else resets that part to the default (one
 * block an SM for one query, two for more; 128, 64 or 32 words by the
 * grid's size and the vectors': cuda_search.cu).
 * The answers are the same bits in every shape.  Process-wide.
 */
typedef void (*gi_cuda_ivf_set_dir_shape_fn) (int blocks_per_sm, int ilp);
#define GI_CUDA_IVF_SET_DIR_SHAPE "gi_cuda_ivf_set_dir_shape"

/*
 * The IVF kind's multi-query tiles (a list read once for the queries of the
 * batch that probe it): mode 1 takes them for every batch of k <= 1024
 * whose tile fits, also for few queries; 0 (the default) only where the
 * batch probes twice as many (query, list) pairs as there are lists.
 * Process-wide.
 */
typedef void (*gi_cuda_ivf_set_tiles_fn) (int mode);
#define GI_CUDA_IVF_SET_TILES "gi_cuda_ivf_set_tiles"

/*
 * The IVF kind's tiles over the slab directory: slabs (> 0) slabs of a list
 * a block takes, a long list's tile spread over several blocks; 0 the
 * default (cuda_search.cu); below 0 a block a tile, walking the list's
 * chain.  The answers are the same in every case.  Process-wide.
 */
typedef void (*gi_cuda_ivf_set_tile_chunk_fn) (int slabs);
#define GI_CUDA_IVF_SET_TILE_CHUNK "gi_cuda_ivf_set_tile_chunk"

/*
 * Benchmarks: time the device part of each mutation with CUDA events
 * (uploads, kernels, patches; not the host-side planning), read back as
 * the last insert's or delete's device milliseconds.
 */
typedef gi_status (*gi_cuda_store_set_timing_fn) (gi_store *store, bool on);
#define GI_CUDA_STORE_SET_TIMING "gi_cuda_store_set_timing"
typedef double (*gi_cuda_store_last_device_ms_fn) (gi_store *store);
#define GI_CUDA_STORE_LAST_DEVICE_MS "gi_cuda_store_last_device_ms"

/*
 * Measured copy bandwidths in GB/s (bytes read + written for device to
 * device, bytes moved for host to device), medians of several copies of
 * `bytes`: the floors of the benchmarks are computed from these.  A NULL
 * pointer skips that figure.
 */
typedef gi_status (*gi_cuda_bandwidth_fn) (size_t bytes, double *d2d,
										   double *h2d_pageable, double *h2d_pinned);
#define GI_CUDA_BANDWIDTH "gi_cuda_bandwidth"

/*
 * Where mutations spend their wall time, accumulated since creation or
 * the last reset, in milliseconds: out[0] insert planning, [1] payload
 * copy not hidden behind planning, [2] shipping (patches, copies,
 * launches), [3] waiting for the device, [4] pool growth (included in
 * [0]), [5] key map resizes (the batch's pre-sizing before planning, or
 * in [0] when the map grows during planning), [6] delete on the host
 * side, [7] delete's device part (upload, kernels, read-back); counts:
 * [8] pool growths, [9] map resizes, [10] insert chunks; [11] the device
 * bytes the store holds now (pool, ATT, headers, list heads); [12] the
 * device part of the pool growths (allocations, queued copies; included
 * in [4]).  out may be NULL (reset only).
 */
#define GI_CUDA_PROFILE_N 13
typedef gi_status (*gi_cuda_store_profile_fn) (gi_store *store, double *out, uint32_t nout,
											   bool reset);
#define GI_CUDA_STORE_PROFILE "gi_cuda_store_profile"

/*
 * Helper threads that copy insert payloads into the pinned upload arenas
 * (default: GI_CUDA_COPY_THREADS, else min(4, CPUs - 1)); 0 copies on the
 * calling thread.  Process-wide; benchmarks compare settings with it.
 */
typedef void (*gi_cuda_set_copy_threads_fn) (int n);
#define GI_CUDA_SET_COPY_THREADS "gi_cuda_set_copy_threads"

/*
 * Sparse kind: the device scratch budget of a search in bytes (0: the
 * default, min(4 GiB, half the free device memory)).  Tests set it small
 * so that a search runs in several sub-batches of queries and ranges of
 * key ordinals.  Process-wide.
 */
typedef void (*gi_cuda_sparse_set_budget_fn) (size_t bytes);
#define GI_CUDA_SPARSE_SET_BUDGET "gi_cuda_sparse_set_budget"

/*
 * Sparse kind: how the term path groups its work (cuda/README.md): 1
 * always by term and query block in slab order, 0 never, -1 the default
 * (when a block's rows exceed half the L2).  Tests force both on small
 * collections.  Process-wide.
 */
typedef void (*gi_cuda_sparse_set_slab_order_fn) (int mode);
#define GI_CUDA_SPARSE_SET_SLAB_ORDER "gi_cuda_sparse_set_slab_order"

/*
 * Sparse kind, counting path: 1 always counts in tiles of shared memory
 * (band ordinals a block, 0 the default width), 0 never, -1 the default
 * (when the lists' slabs follow their ordinals closely enough).  Tests
 * force both, with narrow bands.  Process-wide.
 */
typedef void (*gi_cuda_sparse_set_count_tiles_fn) (int mode, uint32_t band);
#define GI_CUDA_SPARSE_SET_COUNT_TILES "gi_cuda_sparse_set_count_tiles"

/*
 * Sparse kind: what the store's last search did.  on = 1 times the phases
 * (a synchronisation between them), 0 stops, -1 leaves it (process-wide).
 * out[0] the method (1 term-parallel, 2 document-parallel, 3 counting),
 * [1] query sub-batches, [2] ordinal ranges, [3] postings the term path
 * scatters (over the queries' terms, the lists' live records), [4]
 * postings of the union of the batch's terms, [5] directory build ms, [6]
 * scoring ms, [7] candidates, selection and ordering ms, [8] the whole
 * search ms, [9] counting path: queries whose ties overflowed the
 * candidates and went by the term path, [10] counting path: ordinals a
 * tiled block counted (0: the plain scatter).
 */
#define GI_CUDA_SPARSE_PROFILE_N 11
typedef gi_status (*gi_cuda_sparse_profile_fn) (gi_store *store, int on, double *out,
												uint32_t nout);
#define GI_CUDA_SPARSE_PROFILE "gi_cuda_sparse_profile"

#ifdef __cplusplus
}
#endif

#endif							/* GI_CUDA_TEST_H */
