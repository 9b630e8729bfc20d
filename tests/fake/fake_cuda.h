/*
 * fake_cuda.h - the CUDA runtime and cuBLASLt as the CPU tests see them: every call the library makes is replaced at
 * link time (-Wl,--wrap; the list is GG_FAKED_CUDA in tests/CMakeLists.txt) by a fake that hands out fake handles,
 * counts what is alive, counts every call that would put work on a stream, writes the DOT files asked for (one line),
 * and fails on request: the N-th resource creation, or the k-th call of one kind (fault injection; host memory is one
 * kind: the library's malloc, calloc, realloc and strdup, wrapped too). Copies between host and device copy nothing
 * (device memory is a token), and queries of streams and events say done unless told otherwise. Used by test_api,
 * test_faults, test_routes, test_autotune, test_dist_faults and the fuzz target.
 * test_step_ring turns on the two parts below that are off by default: device addresses that stand for real sizes
 * (fake.device_space) and the log of enqueued work (fake_log; fake_nccl.c adds its collectives to it).
 *
 * The device: by default cudaDeviceGetAttribute answers 132 to everything (132 SMs; a compute capability of
 * 132.132, so the library's sm_90a-only routes stay off). fake.compute_capability = 90 makes it an H100/H200 (9.0,
 * 132 SMs, 50 MiB of L2): a context then probes gemm_f32w.cu's cluster capacity (cudaFuncSetAttribute,
 * cudaOccupancyMaxActiveClusters: fake.cluster_capacity, an H200's 132, 66, 39, 30, 22, 17, 15, 15 clusters of 1..8
 * CTAs) and takes the Hopper routes (has_wgmma; test_routes). cuTensorMapEncodeTiled (through
 * cudaGetDriverEntryPointByVersion, on any device) checks its arguments as the driver documents and writes only the
 * global address into the map (the log sees it).
 * Every kernel launch, <<<>>> or cudaLaunchKernelEx (clusters, priorities), is counted per kernel
 * (fake_kernel_launches) and refused as the runtime would for an empty grid or block, more than 1024 threads, more
 * dynamic shared memory than 48 KiB or the kernel's opt-in, or a cluster that is larger than 8 or does not divide
 * the grid.
 */
#ifndef GG_FAKE_CUDA_H
#define GG_FAKE_CUDA_H

#include <stdint.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

/* Distinct, 16-byte aligned fake device addresses for the tests' tensors, far apart so that no two overlap (nothing
 * is mapped there: every address outside the host ranges is device memory to these fakes). */
#define FAKE(i) ((void *)(uintptr_t)(0x100000000000ull * (uint64_t)((i) + 1)))

/* The calls fault injection can fail, each counted on its own. */
typedef enum fake_kind {
    FAKE_MATMUL,        /* cublasLtMatmul */
    FAKE_LAUNCH,        /* a kernel launch: __cudaLaunchKernel (<<<>>>) or cudaLaunchKernelExC */
    FAKE_EVENT_RECORD,  /* cudaEventRecord */
    FAKE_WAIT_EVENT,    /* cudaStreamWaitEvent */
    FAKE_MALLOC,        /* cudaMalloc */
    FAKE_HEURISTIC,     /* cublasLtMatmulAlgoGetHeuristic */
    FAKE_BEGIN_CAPTURE, /* cudaStreamBeginCapture / cudaStreamBeginCaptureToGraph */
    FAKE_END_CAPTURE,   /* cudaStreamEndCapture */
    FAKE_INSTANTIATE,   /* cudaGraphInstantiate */
    FAKE_EXEC_UPDATE,   /* cudaGraphExecUpdate */
    FAKE_GRAPH_LAUNCH,  /* cudaGraphLaunch */
    FAKE_HOST_MEMORY,   /* malloc, calloc, realloc, strdup: the library's host memory (and a test's own) */
    FAKE_MEMCPY,        /* cudaMemcpy (the synchronous copies: uploads at planning, reads of device words) */
    FAKE_KINDS
} fake_kind;

extern const char *const fake_kind_names[FAKE_KINDS];

#define FAKE_MAX_EPILOGUES 8
#define FAKE_MAX_CANDIDATES 16      /* algorithms the fake heuristic offers at most */
#define FAKE_ALGO_TAG0 100          /* CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION of its first */
#define FAKE_MAX_CLUSTER 8          /* CTAs per cluster a launch may have (the portable limit) */
#define FAKE_SMEM_DEFAULT 49152     /* dynamic shared memory a kernel may use without the opt-in */
#define FAKE_SMEM_OPTIN 232448      /* ... and at most with it (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB) */

typedef struct fake_state {
    int device_count;      /* what cudaGetDeviceCount reports */
    int fail_get_device;   /* cudaGetDevice fails (the call then stops before planning) */
    int pci_bus_id;        /* 1: cudaDeviceGetPCIBusId says "0000:99:00.0", a bus no machine here has; 0 (default): it
                              fails, as without a GPU, so that binding a thread stops before loading hwloc's topology
                              (whose plugins leak) */
    const char *pci_bus_id_string; /* with pci_bus_id 1: the bus it says instead of "0000:99:00.0" (NULL: that one) */
    int fail_create_at;    /* the N-th resource creation fails (0: none) */
    int creates;           /* resource creations so far */
    int live;              /* resources created and not destroyed (streams, events, memory, handles, graphs) */
    int enqueued;          /* stream work: kernel launches, GEMMs, event records and waits, graph launches */
    int graph_launches;    /* cudaGraphLaunch calls that succeeded */
    int planned;           /* cuBLASLt plans attempted */
    int plan_ok;           /* 0: the fake refuses every plan (cublasLtMatmulDescCreate); 1: plans succeed */
    int heuristic_split_k; /* > 0: the heuristic's one algorithm has split-k this (0: no attribute set, as before) */
    int algo_check_ok;     /* 1: cublasLtMatmulAlgoCheck accepts every algorithm without split-k (no workspace); 0:
                            * it accepts none (a re-configured or re-shaped algorithm is never vouched for) */
    cublasComputeType_t planned_compute; /* the compute type of the last one */
    int tail_matmuls;      /* cublasLtMatmul calls that add to the D the previous one on their stream wrote, from A
                            * and B further in (a k run in two, gg_matmul_tail_apart); also in calls[FAKE_MATMUL] */
    int tail_matmuls_beside; /* those that ran first, on another stream than their first part (its sum apart) */
    _Atomic int cuda_calls; /* every faked call (the watchdog thread makes some) */
    int capturing;         /* cudaStreamIsCapturing reports an active capture on any stream but the capture's own */
    int captures_open;     /* captures begun and not ended (must be 0 after every call) */
    int captures;          /* captures begun (successfully) since the last fake_reset */
    unsigned dot_flags;    /* the flags of the last cudaGraphDebugDotPrint */
    uintptr_t host_lo, host_hi; /* [lo, hi): what cudaPointerGetAttributes calls host memory */
    int host_pinned;            /* ... pinned (cudaMemoryTypeHost) rather than unregistered */
    uintptr_t managed_lo, managed_hi; /* [lo, hi): managed memory */
    uintptr_t foreign_lo, foreign_hi; /* [lo, hi): device memory of device 1; elsewhere the device is not said (-1) */
    cudaStream_t foreign_stream;      /* a stream of device 1 (cudaStreamGetDevice); every other one is the current
                                       * device's */
    int pointer_queries;   /* cudaPointerGetAttributes calls */
    fake_kind fail_kind;   /* with fail_at: the fail_at-th call of this kind fails */
    int fail_at;           /* 0: no fault */
    int injected;          /* faults injected so far */
    int calls[FAKE_KINDS]; /* calls of each kind since the last fake_reset */
    void (*on_is_capturing)(void); /* called inside cudaStreamIsCapturing (a test's hook), NULL: none */
    /* The data-parallel path (test_dist_faults): */
    _Atomic int events_busy;  /* cudaEventQuery reports cudaErrorNotReady (work that never finishes) */
    /* > 0: the work before each event recorded from now on takes this long after the previous one's (one stream's
     * work in order): cudaEventQuery reports cudaErrorNotReady until then (replays queued far ahead) */
    double events_apart_s;
    double events_last_done_s; /* when the last such event is done (monotonic seconds) */
    _Atomic int events_error; /* nonzero: cudaEventQuery reports this cudaError_t (work that failed on the GPU) */
    _Atomic int streams_busy; /* cudaStreamQuery reports cudaErrorNotReady */
    _Atomic int streams_error; /* nonzero: cudaStreamQuery reports this cudaError_t */
    /* called by cudaMemcpyAsync device -> host with the host buffer (a test plays the other ranks), NULL: none */
    void (*on_copy_to_host)(void *dst, size_t bytes);
    /* called by cudaMemcpy device -> host (synchronous) with the host buffer, which the fake zeroed first (a test
     * plays what the device would hold, e.g. the other ranks' part of the warm-up's result), NULL: none */
    void (*on_sync_copy_to_host)(void *dst, size_t bytes);
    void (*on_free)(void *ptr); /* called as cudaFree begins (a test's stand-in for a free that waits for the GPU) */
    void (*on_stream_sync)(cudaStream_t stream); /* called inside cudaStreamSynchronize (a stand-in for a stream
                                                    whose work waits behind another's), NULL: none */
    const void *sync_copy_from; /* the device address of the last cudaMemcpy device -> host */
    const void *memset_at;      /* the address of the last cudaMemset (synchronous), and how many there were */
    int memsets;
    /* cuBLASLt epilogues: the ones planned (CUBLASLT_MATMUL_DESC_EPILOGUE, in order) and the last bias and aux
     * pointers set */
    cublasLtEpilogue_t epilogues[FAKE_MAX_EPILOGUES];
    int n_epilogues;
    const void *bias_pointer, *aux_pointer;
    double launch_us;  /* what each kernel launch adds to the device clock (clock_us); 0 by default */
    int dgelu_matmuls; /* cublasLtMatmul runs whose descriptor has the DGELU epilogue (block 3's R written by G) */
    /* cudaMalloc hands out addresses in a reserved range that nothing is mapped at, each allocation as many bytes
     * from the last as it asked for: ranges of device memory can be compared (never dereferenced) */
    int device_space;
    /* The device (see the top). 0: the default; 90: compute capability 9.0, an H100/H200 */
    int compute_capability;
    int cluster_capacity[FAKE_MAX_CLUSTER + 1]; /* [s]: clusters of s CTAs that fit at once; fake_reset: an H200's */
    int fail_occupancy;    /* cudaOccupancyMaxActiveClusters fails (a device that cannot run the kernel) */
    int launches;          /* kernel launches that succeeded (<<<>>> and cudaLaunchKernelEx) */
    int cluster_launches;  /* ... of them with a cluster-dimension attribute */
    int unnamed_launches;  /* ... of them of a kernel __cudaRegisterFunction did not name */
    int refused_launches;  /* launches refused for their shape (grid, block, shared memory, cluster) */
    int func_attributes;   /* cudaFuncSetAttribute calls */
    int occupancy_queries; /* cudaOccupancyMaxActiveClusters calls */
    int tensor_maps;       /* cuTensorMapEncodeTiled calls */
    int refused_tensor_maps; /* ... refused for their arguments */
    /* Autotune (test_autotune). The heuristic offers heuristic_count algorithms (0 counts as 1), candidate i tagged
     * with CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION FAKE_ALGO_TAG0 + i; each cublasLtMatmul of candidate i advances the
     * device clock by algo_us[i] microseconds and counts in algo_runs[i] (untagged algorithms count in
     * algo_runs_untagged), unless bit i of algo_fail_mask makes it fail (CUBLAS_STATUS_NOT_SUPPORTED). cudaEventRecord
     * stamps an event with the clock; cudaEventElapsedTime gives the difference of two stamps. */
    int heuristic_count;
    double algo_us[FAKE_MAX_CANDIDATES];
    int algo_runs[FAKE_MAX_CANDIDATES];
    int algo_runs_untagged;
    unsigned algo_fail_mask;
    double clock_us;
    cudaStream_t last_wait_stream; /* the stream of the last cudaStreamWaitEvent, */
    cudaStream_t last_wait_on;     /* the stream its event was last recorded on, */
    int last_wait_at;              /* and fake.enqueued just after it (what came before it is below) */
} fake_state;

extern fake_state fake;
/* The error a failed call left for cudaGetLastError (cudaPeekAtLastError reads it): one per thread, as the runtime
 * keeps it, so that one thread's failure is never another's pending error. fake_reset clears the calling thread's. */
extern _Thread_local cudaError_t fake_pending;

/* The log of enqueued work (fake_log_start .. fake_log_stop): every call that puts work on a stream while a capture
 * is open, in the order the library makes it, with its stream, the event of an event record or wait, and the device
 * ranges it touches where the fake can know them: a GEMM's A, B, C, D (from their layouts), workspace, bias and aux
 * pointers; a memset's or an asynchronous copy's bytes; a kernel's pointer arguments (one byte each: a kernel's reach
 * past the pointer it is handed is invisible here) and the 8-byte words of its arguments of class type (their first
 * FAKE_CLASS_SCAN bytes, or fewer where the launch laid another argument's value out after the class: the scan stops
 * there rather than read the launching frame's stale words, which may point into another call's memory), the
 * argument types read from the kernel's name (__cudaRegisterFunction's, demangled). Reads
 * and writes are not told apart. */
typedef enum fake_op {
    FAKE_OP_KERNEL, FAKE_OP_MATMUL, FAKE_OP_MEMSET, FAKE_OP_MEMCPY, FAKE_OP_RECORD, FAKE_OP_WAIT, FAKE_OP_GRAPH,
    FAKE_OP_COLLECTIVE, /* an NCCL collective (fake_nccl.c): its send and receive buffers */
    FAKE_OP_MARK /* fake_log_mark: a test's note of where it stands (which call the entries after it belong to) */
} fake_op;

enum { FAKE_LOG_RANGES = 32, FAKE_CLASS_SCAN = 128 };

/* How an operation touches a range. */
typedef enum fake_access {
    FAKE_READS,      /* it reads it */
    FAKE_WRITES,     /* it may write it (a kernel's pointer to non-const, a GEMM's D, a copy's dst, ...) */
    FAKE_ATOMICALLY, /* a kernel's unsigned int *: the counters and flags kernels update atomically */
    FAKE_MAYBE       /* a word found in a kernel's class argument (or past it, in the launching frame): maybe an
                        address */
} fake_access;

typedef struct fake_range {
    uintptr_t lo, hi; /* [lo, hi) */
    fake_access writes;
} fake_range;

typedef struct fake_entry {
    fake_op op;
    cudaStream_t stream; /* NULL for a mark */
    cudaEvent_t event;   /* FAKE_OP_RECORD, FAKE_OP_WAIT */
    int mark;            /* FAKE_OP_MARK: the test's value */
    int n_ranges;
    fake_range ranges[FAKE_LOG_RANGES];
    const char *kernel; /* FAKE_OP_KERNEL: its mangled name, NULL when the fake has none */
} fake_entry;

typedef struct fake_log_state {
    int on;
    fake_entry *entries;
    int n, cap;
    int truncated;       /* entries that had more ranges than FAKE_LOG_RANGES, or could not be logged */
    int unknown_kernels; /* launches whose argument types the fake could not read */
} fake_log_state;

extern fake_log_state fake_log;

/* Whether the last cudaGraphDebugDotPrint wrote `path` with `flags`; the file is removed either way. */
int fake_dot_written(const char *path, unsigned flags);

/* A test's knowledge of what a kernel reaches past its pointer arguments (an optimizer's parameter table, say): when
 * set, called for every logged kernel launch (kernel its mangled name or NULL, args its arguments, grid its grid), and
 * may add ranges to e with fake_log_range. Not cleared by fake_reset or fake_log_start: the test that sets it clears
 * it. */
extern void (*fake_kernel_reach)(fake_entry *e, const char *kernel, void **args, dim3 grid);
/* Adds [p, p + bytes) to e as `access` (nothing when e or p is NULL or bytes is 0; counted in truncated when e is
 * full). */
void fake_log_range(fake_entry *e, const void *p, size_t bytes, fake_access access);

void fake_log_start(void); /* clears the log and logs from now on */
void fake_log_stop(void);  /* stops logging; the entries stay until fake_log_free or the next start */
void fake_log_free(void);
void fake_log_mark(int mark);
/* An NCCL collective on `stream`, logged like the CUDA work (inside a capture, while logging): its send and receive
 * buffers' ranges. */
void fake_log_collective(cudaStream_t stream, const void *send, size_t send_bytes, const void *recv,
                         size_t recv_bytes);

/* Clears everything (the launch counts per kernel too); a machine with device_count default devices (no
 * compute_capability) with an H200's cluster_capacity, whose cuBLASLt refuses to plan. */
void fake_reset(int device_count);

/* Launches since the last fake_reset of the kernels whose mangled name contains name_part ("gemm_f32w_kernel"). */
int fake_kernel_launches(const char *name_part);

#endif
