/*
 * fake_cuda.h - the CUDA runtime and cuBLASLt as the CPU tests see them: every call the library makes is replaced at
 * link time (-Wl,--wrap; the list is GG_FAKED_CUDA in tests/CMakeLists.txt) by a fake that hands out fake handles,
 * counts what is alive, counts every call that would put work on a stream, writes the DOT files asked for (one line), and fails on request: the N-th resource
 * creation, or the k-th call of one kind (fault injection). Copies between host and device copy nothing (device
 * memory is a token), and queries of streams and events say done unless told otherwise. Used by test_api,
 * test_faults, test_dist_faults and the fuzz target.
 */
#ifndef GG_FAKE_CUDA_H
#define GG_FAKE_CUDA_H

#include <stdint.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

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
    FAKE_KINDS
} fake_kind;

extern const char *const fake_kind_names[FAKE_KINDS];

#define FAKE_MAX_EPILOGUES 8

typedef struct fake_state {
    int device_count;      /* what cudaGetDeviceCount reports */
    int fail_get_device;   /* cudaGetDevice fails (the call then stops before planning) */
    int fail_create_at;    /* the N-th resource creation fails (0: none) */
    int creates;           /* resource creations so far */
    int live;              /* resources created and not destroyed (streams, events, memory, handles, graphs) */
    int enqueued;          /* stream work: kernel launches, GEMMs, event records and waits, graph launches */
    int graph_launches;    /* cudaGraphLaunch calls that succeeded */
    int planned;           /* cuBLASLt plans attempted */
    int plan_ok;           /* 0: the fake refuses every plan (cublasLtMatmulDescCreate); 1: plans succeed */
    cublasComputeType_t planned_compute; /* the compute type of the last one */
    int cuda_calls;        /* every faked call */
    int capturing;         /* cudaStreamIsCapturing reports an active capture on any stream but the capture's own */
    int captures_open;     /* captures begun and not ended (must be 0 after every call) */
    int captures;          /* captures begun (successfully) since the last fake_reset */
    unsigned dot_flags;    /* the flags of the last cudaGraphDebugDotPrint */
    uintptr_t host_lo, host_hi; /* [lo, hi): what cudaPointerGetAttributes calls host memory */
    int host_pinned;            /* ... pinned (cudaMemoryTypeHost) rather than unregistered */
    uintptr_t managed_lo, managed_hi; /* [lo, hi): managed memory */
    int pointer_queries;   /* cudaPointerGetAttributes calls */
    fake_kind fail_kind;   /* with fail_at: the fail_at-th call of this kind fails */
    int fail_at;           /* 0: no fault */
    int injected;          /* faults injected so far */
    int calls[FAKE_KINDS]; /* calls of each kind since the last fake_reset */
    cudaError_t pending;   /* the error a failed launch left for cudaGetLastError */
    void (*on_is_capturing)(void); /* called inside cudaStreamIsCapturing (a test's hook), NULL: none */
    /* The data-parallel path (test_dist_faults): */
    _Atomic int events_busy;  /* cudaEventQuery reports cudaErrorNotReady (work that never finishes) */
    _Atomic int streams_busy; /* cudaStreamQuery reports cudaErrorNotReady */
    /* called by cudaMemcpyAsync device -> host with the host buffer (a test plays the other ranks), NULL: none */
    void (*on_copy_to_host)(void *dst, size_t bytes);
    /* cuBLASLt epilogues: the ones planned (CUBLASLT_MATMUL_DESC_EPILOGUE, in order) and the last bias and aux
     * pointers set */
    cublasLtEpilogue_t epilogues[FAKE_MAX_EPILOGUES];
    int n_epilogues;
    const void *bias_pointer, *aux_pointer;
} fake_state;

extern fake_state fake;

/* Clears everything; a machine with device_count devices whose cuBLASLt refuses to plan. */
void fake_reset(int device_count);

#endif
