/* fake_cuda.c - the fakes of fake_cuda.h: each __wrap_X stands in for X inside the library. */
#include "fake_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fake_state fake;

const char *const fake_kind_names[FAKE_KINDS] = {
    "cublasLtMatmul",         "kernel launch",        "cudaEventRecord",         "cudaStreamWaitEvent",
    "cudaMalloc",             "cublasLtMatmulAlgoGetHeuristic", "cudaStreamBeginCapture", "cudaStreamEndCapture",
    "cudaGraphInstantiate",   "cudaGraphExecUpdate",  "cudaGraphLaunch"};

void fake_reset(int device_count) {
    memset(&fake, 0, sizeof fake);
    fake.device_count = device_count;
}

/* A resource creation: fails when it is the N-th and N was asked for. */
static int fake_create(void) {
    ++fake.cuda_calls;
    if (++fake.creates == fake.fail_create_at) return 0;
    ++fake.live;
    return 1;
}

/* A call of a kind fault injection can fail: 1 when this one fails. */
static int fake_fault(fake_kind kind) {
    ++fake.cuda_calls;
    if (++fake.calls[kind] != fake.fail_at || fake.fail_kind != kind) return 0;
    ++fake.injected;
    return 1;
}

/* A live handle: a unique address (malloc'd, so that a leak is also seen by the sanitizers). */
static void *fake_handle(void) { return malloc(16); }
static void fake_release(void *handle) {
    if (!handle) return;
    --fake.live;
    free(handle);
}

static char fake_handles[64];
static cudaStream_t capture_stream;
static cudaGraph_t capture_into; /* the graph a cudaStreamBeginCaptureToGraph captures into, NULL: a new one */
static char fake_bodies[64];     /* a conditional node's body graphs: owned by its graph, never destroyed alone */

cudaError_t __wrap_cudaGetDeviceCount(int *count) {
    ++fake.cuda_calls;
    *count = fake.device_count;
    return fake.device_count ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t __wrap_cudaGetDevice(int *device) {
    ++fake.cuda_calls;
    *device = 0;
    return fake.fail_get_device ? cudaErrorDevicesUnavailable : cudaSuccess;
}
cudaError_t __wrap_cudaSetDevice(int device) {
    ++fake.cuda_calls;
    return device < fake.device_count ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t __wrap_cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    (void)attr, (void)device;
    ++fake.cuda_calls;
    *value = 132;
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    (void)flags;
    if (!fake_create()) return cudaErrorUnknown;
    *stream = (cudaStream_t)fake_handle(); /* each stream its own handle: a test can tell them apart */
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned flags, int priority) {
    (void)flags, (void)priority;
    if (!fake_create()) return cudaErrorUnknown;
    *stream = (cudaStream_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    *least = 0;
    *greatest = -5;
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t stream) {
    fake_release(stream);
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t stream) {
    (void)stream;
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
    ++fake.cuda_calls;
    if (fake.on_is_capturing) fake.on_is_capturing();
    const int capturing = fake.capturing || (fake.captures_open > 0 && stream == capture_stream);
    *status = capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
    (void)flags;
    if (!fake_create()) return cudaErrorUnknown;
    *event = (cudaEvent_t)&fake_handles[1];
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t event) {
    (void)event;
    --fake.live;
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    (void)event, (void)stream;
    if (fake_fault(FAKE_EVENT_RECORD)) return cudaErrorLaunchFailure;
    ++fake.enqueued;
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
    (void)stream, (void)event, (void)flags;
    if (fake_fault(FAKE_WAIT_EVENT)) return cudaErrorInvalidResourceHandle;
    ++fake.enqueued;
    return cudaSuccess;
}
cudaError_t __wrap_cudaMalloc(void **ptr, size_t bytes) {
    (void)bytes;
    if (fake_fault(FAKE_MALLOC)) return cudaErrorMemoryAllocation;
    if (!fake_create()) return cudaErrorMemoryAllocation;
    *ptr = malloc(16); /* never dereferenced: a unique address whose leak the sanitizers would see */
    return cudaSuccess;
}
cudaError_t __wrap_cudaFree(void *ptr) {
    if (ptr) --fake.live;
    free(ptr);
    return cudaSuccess;
}
cudaError_t __wrap_cudaGetLastError(void) {
    const cudaError_t e = fake.pending;
    fake.pending = cudaSuccess;
    return e;
}
cudaError_t __wrap_cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    (void)src, (void)kind;
    ++fake.cuda_calls;
    if (kind == cudaMemcpyDeviceToHost) memset(dst, 0, bytes);
    return cudaSuccess;
}
cudaError_t __wrap_cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
    (void)src, (void)stream;
    ++fake.cuda_calls;
    ++fake.enqueued;
    if (kind == cudaMemcpyDeviceToHost && fake.on_copy_to_host) fake.on_copy_to_host(dst, bytes);
    return cudaSuccess;
}
cudaError_t __wrap_cudaMallocHost(void **ptr, size_t bytes) {
    if (!fake_create()) return cudaErrorMemoryAllocation;
    *ptr = calloc(1, bytes); /* written and read by the host */
    return cudaSuccess;
}
cudaError_t __wrap_cudaFreeHost(void *ptr) {
    if (ptr) --fake.live;
    free(ptr);
    return cudaSuccess;
}
/* Called from the watchdog's thread too: counts nothing. */
cudaError_t __wrap_cudaStreamQuery(cudaStream_t stream) {
    (void)stream;
    return fake.streams_busy ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t __wrap_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
    *mode = cudaStreamCaptureModeGlobal; /* the previous mode; the watchdog's thread only */
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventQuery(cudaEvent_t event) {
    (void)event;
    return fake.events_busy ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t __wrap_cudaMemset(void *dst, int value, size_t bytes) {
    (void)dst, (void)value, (void)bytes;
    ++fake.cuda_calls;
    return cudaSuccess;
}
cudaError_t __wrap_cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    (void)dst, (void)value, (void)bytes, (void)stream;
    ++fake.cuda_calls;
    ++fake.enqueued;
    return cudaSuccess;
}
cudaError_t __wrap_cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)64 << 30;
    *total = (size_t)141 << 30;
    return cudaSuccess;
}
cudaError_t __wrap_cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t __wrap_cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr) {
    ++fake.cuda_calls;
    ++fake.pointer_queries;
    memset(attr, 0, sizeof *attr);
    const uintptr_t p = (uintptr_t)ptr;
    if (p >= fake.host_lo && p < fake.host_hi)
        attr->type = fake.host_pinned ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
    else if (p >= fake.managed_lo && p < fake.managed_hi)
        attr->type = cudaMemoryTypeManaged;
    else
        attr->type = cudaMemoryTypeDevice;
    return cudaSuccess;
}
cudaError_t __wrap___cudaGetKernel(cudaKernel_t *kernel, const void *func) {
    (void)func;
    *kernel = (cudaKernel_t)&fake_handles[2];
    return cudaSuccess;
}
/* A failed launch leaves its error for cudaGetLastError, as the runtime does for <<<>>>. */
cudaError_t __wrap___cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared,
                                      cudaStream_t stream) {
    (void)kernel, (void)grid, (void)block, (void)args, (void)shared, (void)stream;
    if (fake_fault(FAKE_LAUNCH)) return fake.pending = cudaErrorLaunchOutOfResources;
    ++fake.enqueued;
    return cudaSuccess;
}
cudaError_t __wrap_cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
    (void)config, (void)func, (void)args;
    if (fake_fault(FAKE_LAUNCH)) return cudaErrorLaunchOutOfResources;
    ++fake.enqueued;
    return cudaSuccess;
}

/* ---- graphs ---- */
cudaError_t __wrap_cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    (void)mode;
    if (fake_fault(FAKE_BEGIN_CAPTURE)) return cudaErrorStreamCaptureUnsupported;
    capture_stream = stream;
    capture_into = NULL;
    ++fake.captures_open;
    ++fake.captures;
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                                 const cudaGraphEdgeData *data, size_t n,
                                                 enum cudaStreamCaptureMode mode) {
    (void)deps, (void)data, (void)n;
    const cudaError_t err = __wrap_cudaStreamBeginCapture(stream, mode);
    if (err == cudaSuccess) capture_into = graph;
    return err;
}
cudaError_t __wrap_cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    (void)stream;
    --fake.captures_open; /* ends the capture even when it fails, as the runtime does */
    *graph = NULL;
    if (fake_fault(FAKE_END_CAPTURE)) return cudaErrorStreamCaptureInvalidated;
    if (capture_into) { /* the runtime hands back the graph captured into: nothing new is alive */
        *graph = capture_into;
        capture_into = NULL;
        return cudaSuccess;
    }
    if (!fake_create()) return cudaErrorMemoryAllocation;
    *graph = (cudaGraph_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphCreate(cudaGraph_t *graph, unsigned flags) {
    (void)flags;
    if (!fake_create()) return cudaErrorMemoryAllocation;
    *graph = (cudaGraph_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphDestroy(cudaGraph_t graph) {
    fake_release(graph);
    return cudaSuccess;
}
/* Device-side selection's parts: a handle, the selection node, and a SWITCH node whose bodies the fake hands out. */
cudaError_t __wrap_cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *handle, cudaGraph_t graph,
                                                    unsigned default_value, unsigned flags) {
    (void)graph, (void)default_value, (void)flags;
    ++fake.cuda_calls;
    *handle = 1;
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count) {
    (void)graph;
    ++fake.cuda_calls;
    if (nodes && *count >= 1) nodes[0] = (cudaGraphNode_t)&fake_handles[8];
    *count = 1;
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphAddNode(cudaGraphNode_t *node, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *data, size_t n, struct cudaGraphNodeParams *params) {
    (void)graph, (void)deps, (void)data, (void)n;
    ++fake.cuda_calls;
    static cudaGraph_t bodies[sizeof fake_bodies];
    if (params->type == cudaGraphNodeTypeConditional) {
        if (params->conditional.size > sizeof fake_bodies) return cudaErrorInvalidValue;
        for (unsigned i = 0; i < params->conditional.size; ++i) bodies[i] = (cudaGraph_t)&fake_bodies[i];
        params->conditional.phGraph_out = bodies;
    }
    *node = (cudaGraphNode_t)&fake_handles[9];
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)graph, (void)flags;
    *exec = NULL;
    if (fake_fault(FAKE_INSTANTIATE)) return cudaErrorInvalidValue;
    if (!fake_create()) return cudaErrorMemoryAllocation;
    *exec = (cudaGraphExec_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info) {
    (void)exec, (void)graph;
    memset(info, 0, sizeof *info);
    if (fake_fault(FAKE_EXEC_UPDATE)) return cudaErrorGraphExecUpdateFailure;
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphExecDestroy(cudaGraphExec_t exec) {
    fake_release(exec);
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    (void)exec, (void)stream;
    if (fake_fault(FAKE_GRAPH_LAUNCH)) return cudaErrorLaunchFailure;
    ++fake.enqueued;
    ++fake.graph_launches;
    return cudaSuccess;
}
/* DOT files are written for real, one line, so that a test sees the file the library asked for. */
cudaError_t __wrap_cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned flags) {
    (void)graph;
    ++fake.cuda_calls;
    fake.dot_flags = flags;
    FILE *f = fopen(path, "w");
    if (!f) return cudaErrorOperatingSystem;
    fputs("digraph fake {}\n", f);
    fclose(f);
    return cudaSuccess;
}

/* ---- cuBLASLt ---- */
cublasStatus_t __wrap_cublasLtCreate(cublasLtHandle_t *handle) {
    if (!fake_create()) return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = (cublasLtHandle_t)&fake_handles[3];
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtDestroy(cublasLtHandle_t handle) {
    (void)handle;
    --fake.live;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t c, cudaDataType_t s) {
    (void)s;
    ++fake.planned;
    fake.planned_compute = c;
    if (!fake.plan_ok) return CUBLAS_STATUS_NOT_SUPPORTED; /* planning stops: validation let the call through */
    if (!fake_create()) return CUBLAS_STATUS_ALLOC_FAILED;
    *desc = (cublasLtMatmulDesc_t)fake_handle();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    fake_release(desc);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                                     const void *buf, size_t bytes) {
    (void)desc, (void)bytes;
    if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE) fake.epilogues[fake.n_epilogues++ % FAKE_MAX_EPILOGUES] =
        *(const cublasLtEpilogue_t *)buf;
    if (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER) memcpy(&fake.bias_pointer, buf, sizeof fake.bias_pointer);
    if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER) memcpy(&fake.aux_pointer, buf, sizeof fake.aux_pointer);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
    (void)type, (void)rows, (void)cols, (void)ld;
    if (!fake_create()) return CUBLAS_STATUS_ALLOC_FAILED;
    *layout = (cublasLtMatrixLayout_t)fake_handle();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    fake_release(layout);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!fake_create()) return CUBLAS_STATUS_ALLOC_FAILED;
    *pref = (cublasLtMatmulPreference_t)fake_handle();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    fake_release(pref);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                           size_t bytes) {
    (void)pref, (void)attr, (void)buf, (void)bytes;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                     cublasLtMatmulPreference_t pref, int requested,
                                                     cublasLtMatmulHeuristicResult_t *results, int *found) {
    (void)h, (void)op, (void)a, (void)b, (void)c, (void)d, (void)pref;
    *found = 0;
    if (fake_fault(FAKE_HEURISTIC)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    memset(&results[0], 0, sizeof results[0]);
    results[0].state = CUBLAS_STATUS_SUCCESS;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b,
                                     const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
                                     cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t *algo, void *ws,
                                     size_t ws_bytes, cudaStream_t stream) {
    (void)h, (void)d, (void)alpha, (void)A, (void)a, (void)B, (void)b, (void)beta, (void)C, (void)c, (void)D;
    (void)dl, (void)algo, (void)ws, (void)ws_bytes, (void)stream;
    if (fake_fault(FAKE_MATMUL)) return CUBLAS_STATUS_EXECUTION_FAILED;
    ++fake.enqueued;
    return CUBLAS_STATUS_SUCCESS;
}
