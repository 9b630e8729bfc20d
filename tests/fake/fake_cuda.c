/* fake_cuda.c - the fakes of fake_cuda.h: each __wrap_X stands in for X inside the library. */
#include "fake_cuda.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

fake_state fake;
_Thread_local cudaError_t fake_pending;
fake_log_state fake_log;

const char *const fake_kind_names[FAKE_KINDS] = {
    "cublasLtMatmul",         "kernel launch",        "cudaEventRecord",         "cudaStreamWaitEvent",
    "cudaMalloc",             "cublasLtMatmulAlgoGetHeuristic", "cudaStreamBeginCapture", "cudaStreamEndCapture",
    "cudaGraphInstantiate",   "cudaGraphExecUpdate",  "cudaGraphLaunch", "host memory", "cudaMemcpy"};

/* An H200's capacity for clusters of 1..8 CTAs of gemm_f32w.cu's kernel (cudaOccupancyMaxActiveClusters): a cluster's
 * CTAs share a GPC, so fewer clusters of 8 fit than 132 / 8. */
static const int h200_clusters[FAKE_MAX_CLUSTER + 1] = {0, 132, 66, 39, 30, 22, 17, 15, 15};

static void kernel_counts_reset(void);
static void device_space_rewind(void);

/* The last cublasLtMatmul's stream, matrices and layouts (fake.tail_matmuls). */
typedef struct fake_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
} fake_layout;
static struct {
    cudaStream_t stream;
    const void *A, *B, *D;
    fake_layout a, b; /* copies: a plan's layouts may be destroyed before the next GEMM */
} previous_matmul;

void fake_reset(int device_count) {
    memset(&previous_matmul, 0, sizeof previous_matmul);
    memset(&fake, 0, sizeof fake);
    fake_pending = cudaSuccess;
    fake.device_count = device_count;
    memcpy(fake.cluster_capacity, h200_clusters, sizeof h200_clusters);
    kernel_counts_reset();
    device_space_rewind();
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

/* Host memory: the k-th allocation fails while FAKE_HOST_MEMORY is the kind asked for (counted only then, so that
 * other threads' allocations, the watchdog's, never touch the counts). The fakes' own allocations come from the real
 * allocator (fake_alloc.h). */
void *__real_malloc(size_t bytes);
void *__real_calloc(size_t count, size_t bytes);
void *__real_realloc(void *p, size_t bytes);
char *__real_strdup(const char *s);
static int host_memory_fault(void) {
    return fake.fail_kind == FAKE_HOST_MEMORY && fake.fail_at && fake_fault(FAKE_HOST_MEMORY);
}
void *__wrap_malloc(size_t bytes) { return host_memory_fault() ? NULL : __real_malloc(bytes); }
void *__wrap_calloc(size_t count, size_t bytes) { return host_memory_fault() ? NULL : __real_calloc(count, bytes); }
void *__wrap_realloc(void *p, size_t bytes) { return host_memory_fault() ? NULL : __real_realloc(p, bytes); }
char *__wrap_strdup(const char *s) { return host_memory_fault() ? NULL : __real_strdup(s); }
#include "fake_alloc.h"

/* A live handle: a unique address (malloc'd, so that a leak is also seen by the sanitizers). */
/* 24 bytes: an event's clock at its last record, that record's stream, and when its work is done (events_apart_s) */
static void *fake_handle(void) { return calloc(1, 24); }

static double monotonic_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static void fake_release(void *handle) {
    if (!handle) return;
    --fake.live;
    free(handle);
}

/* ---- the log of enqueued work ---- */

void fake_log_free(void) {
    free(fake_log.entries);
    memset(&fake_log, 0, sizeof fake_log);
}
void fake_log_start(void) {
    fake_log_free();
    fake_log.on = 1;
}
void fake_log_stop(void) { fake_log.on = 0; }

/* A new entry (NULL when not logging, outside a capture, or out of memory: counted in truncated). */
static fake_entry *log_entry(fake_op op, cudaStream_t stream) {
    if (!fake_log.on || fake.captures_open == 0) return NULL;
    if (fake_log.n == fake_log.cap) {
        const int cap = fake_log.cap ? 2 * fake_log.cap : 256;
        fake_entry *e = realloc(fake_log.entries, sizeof *e * (size_t)cap);
        if (!e) {
            ++fake_log.truncated;
            return NULL;
        }
        fake_log.entries = e;
        fake_log.cap = cap;
    }
    fake_entry *e = &fake_log.entries[fake_log.n++];
    memset(e, 0, sizeof *e);
    e->op = op;
    e->stream = stream;
    return e;
}
void (*fake_kernel_reach)(fake_entry *e, const char *kernel, void **args, dim3 grid);

void fake_log_range(fake_entry *e, const void *p, size_t bytes, fake_access writes) {
    if (!e || !p || !bytes) return;
    if (e->n_ranges == FAKE_LOG_RANGES) {
        ++fake_log.truncated;
        return;
    }
    e->ranges[e->n_ranges++] = (fake_range){(uintptr_t)p, (uintptr_t)p + bytes, writes};
}
void fake_log_collective(cudaStream_t stream, const void *send, size_t send_bytes, const void *recv,
                         size_t recv_bytes) {
    fake_entry *e = log_entry(FAKE_OP_COLLECTIVE, stream);
    fake_log_range(e, send, send_bytes, FAKE_READS);
    fake_log_range(e, recv, recv_bytes, FAKE_WRITES);
}
void fake_log_mark(int mark) {
    fake_entry *e = log_entry(FAKE_OP_MARK, NULL);
    if (e) e->mark = mark;
}

/* Kernels by host function (__cudaRegisterFunction's), with their mangled names. */
enum { MAX_KERNELS = 1024 }; /* registrations past it are dropped: their launches count as unknown_kernels */
typedef struct kernel_entry {
    const void *fn;
    const char *name;
    int launches;      /* launches that succeeded since the last fake_reset */
    int max_dyn_smem;  /* cudaFuncAttributeMaxDynamicSharedMemorySize (0: never set; the default 48 KiB applies). Like
                        * the runtime's, it outlives fake_reset (a process sets it once per kernel). */
} kernel_entry;
static kernel_entry kernels[MAX_KERNELS];
static int n_kernels;

static kernel_entry *kernel_of(const void *fn) {
    for (int i = 0; i < n_kernels; ++i)
        if (kernels[i].fn == fn) return &kernels[i];
    return NULL;
}
static const char *kernel_name(const void *fn) {
    const kernel_entry *k = kernel_of(fn);
    return k ? k->name : NULL;
}
static void kernel_counts_reset(void) {
    for (int i = 0; i < n_kernels; ++i) kernels[i].launches = 0;
}
int fake_kernel_launches(const char *name_part) {
    int n = 0;
    for (int i = 0; i < n_kernels; ++i)
        if (kernels[i].name && strstr(kernels[i].name, name_part)) n += kernels[i].launches;
    return n;
}

/* libstdc++'s demangler (extern "C"). */
char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status);

/* The type at [b, e) without surrounding blanks and trailing qualifiers: ends with '*' when it is a pointer. */
static int is_pointer_type(const char *b, const char *e) {
    static const char *const quals[] = {" __restrict__", " __restrict", " const", " volatile"};
    for (int again = 1; again;) {
        again = 0;
        while (e > b && e[-1] == ' ') --e;
        for (size_t q = 0; q < sizeof quals / sizeof quals[0]; ++q) {
            const size_t n = strlen(quals[q]);
            if ((size_t)(e - b) > n && !strncmp(e - n, quals[q], n)) e -= n, again = 1;
        }
    }
    return e > b && e[-1] == '*';
}

/* Whether the pointer type at [b, e) points to const ("float const*", "const float*", "__half const* __restrict__"):
 * the kernel only reads through it. */
static int points_to_const(const char *b, const char *e) {
    const char *star = e;
    while (star > b && star[-1] != '*') --star;
    if (star == b) return 0;
    const char *t = star - 1; /* the '*' */
    while (t > b && t[-1] == ' ') --t;
    if (t - b >= 5 && !strncmp(t - 5, "const", 5)) return 1;
    while (b < t && *b == ' ') ++b;
    return !strncmp(b, "const ", 6);
}

/* Whether the pointer type at [b, e) points to unsigned int: the kernels' counters and flags (the last CTA's count,
 * the overflow word, the device error count), which they update with atomics. */
static int points_to_unsigned(const char *b, const char *e) {
    while (b < e && *b == ' ') ++b;
    return !strncmp(b, "unsigned int*", 13) || !strncmp(b, "unsigned int *", 14);
}

/* Whether [b, e) names a type of the language's own (an argument that holds no address), not a class. */
static int is_scalar_type(const char *b, const char *e) {
    while (b < e && *b == ' ') ++b;
    while (e > b && e[-1] == ' ') --e;
    static const char *const scalars[] = {
        "bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
        "unsigned long", "long long", "unsigned long long", "float", "double", "int const", "long const",
        "unsigned int const", "unsigned long const", "float const", "double const", "bool const", "long long const"};
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; ++i)
        if ((size_t)(e - b) == strlen(scalars[i]) && !strncmp(b, scalars[i], (size_t)(e - b))) return 1;
    return 0;
}

/* Reads the word at p, which may lie past a smaller argument in the launching frame: not instrumented, so that
 * AddressSanitizer does not take the look for an overflow. */
__attribute__((no_sanitize("address"))) static uintptr_t peek_word(const void *p) {
    return *(const volatile uintptr_t *)p;
}

/* The ranges of a launch of fn with args: its pointer arguments and the words of its class arguments. */
static void log_kernel_args(fake_entry *e, const void *fn, void **args) {
    if (!e) return;
    e->kernel = kernel_name(fn);
    int status = -1;
    char *sig = e->kernel ? __cxa_demangle(e->kernel, NULL, NULL, &status) : NULL;
    const char *close = sig ? strrchr(sig, ')') : NULL;
    const char *open = NULL;
    for (int depth = 0, i = close ? (int)(close - sig) : -1; i >= 0 && !open; --i) {
        depth += sig[i] == ')' ? 1 : sig[i] == '(' ? -1 : 0;
        if (depth == 0) open = sig + i;
    }
    if (!open) {
        ++fake_log.unknown_kernels;
        free(sig);
        return;
    }
    /* the arguments' spans in the signature first: a class argument's scan stops at the next argument's value */
    enum { MAX_ARGS = 32 };
    const char *spans[MAX_ARGS][2];
    int n_args = 0, depth = 0;
    for (const char *b = open + 1, *p = b; p <= close; ++p) {
        if (*p == '<' || *p == '(' || *p == '[') ++depth;
        if ((*p == '>' || *p == ')' || *p == ']') && p != close) --depth;
        if (!(p == close || (*p == ',' && depth == 0))) continue;
        if (p > b && !(p - b == 4 && !strncmp(b, "void", 4)) && n_args < MAX_ARGS)
            spans[n_args][0] = b, spans[n_args++][1] = p;
        b = p + 1;
    }
    for (int arg = 0; arg < n_args; ++arg) {
        const char *b = spans[arg][0], *p = spans[arg][1];
        const void *at = args[arg];
        if (is_pointer_type(b, p)) {
            fake_log_range(e, (const void *)peek_word(at), 1,
                           points_to_const(b, p)      ? FAKE_READS
                           : points_to_unsigned(b, p) ? FAKE_ATOMICALLY
                                                      : FAKE_WRITES);
        } else if (!is_scalar_type(b, p) && (uintptr_t)at % sizeof(uintptr_t) == 0) {
            /* the class's words, or the frame's past it: up to FAKE_CLASS_SCAN bytes, but not into another
             * argument's value where the launch laid one out after it (its own words are logged as that argument) */
            size_t scan = FAKE_CLASS_SCAN;
            for (int other = 0; other < n_args; ++other) {
                const ptrdiff_t gap = (const char *)args[other] - (const char *)at;
                if (other != arg && gap > 0 && (size_t)gap < scan) scan = (size_t)gap;
            }
            for (size_t off = 0; off + sizeof(uintptr_t) <= scan; off += sizeof(uintptr_t)) {
                const uintptr_t w = peek_word((const char *)at + off);
                if (w) fake_log_range(e, (const void *)w, 1, FAKE_MAYBE);
            }
        }
    }
    free(sig);
}

void __real___cudaRegisterFunction(void **fatbin, const char *host_fn, char *device_fn, const char *device_name,
                                   int thread_limit, uint3 *tid, uint3 *bid, dim3 *block, dim3 *grid, int *warp_size);
void __wrap___cudaRegisterFunction(void **fatbin, const char *host_fn, char *device_fn, const char *device_name,
                                   int thread_limit, uint3 *tid, uint3 *bid, dim3 *block, dim3 *grid, int *warp_size) {
    if (n_kernels < MAX_KERNELS) kernels[n_kernels++] = (kernel_entry){host_fn, device_fn, 0, 0};
    __real___cudaRegisterFunction(fatbin, host_fn, device_fn, device_name, thread_limit, tid, bid, block, grid,
                                  warp_size);
}

/* fake.device_space: a range reserved and never mapped, handed out in order. */
enum { DEVICE_SPACE_BITS = 38 };
static char *device_space, *device_next;

static int in_device_space(const void *p) {
    return device_space && (const char *)p >= device_space &&
           (const char *)p < device_space + ((size_t)1 << DEVICE_SPACE_BITS);
}
/* A reset's device space starts over (what an earlier context held is gone with it). */
static void device_space_rewind(void) { device_next = device_space; }

static void *device_space_take(size_t bytes) {
    if (!device_space) {
        void *m = mmap(NULL, (size_t)1 << DEVICE_SPACE_BITS, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (m == MAP_FAILED) return NULL;
        device_space = device_next = m;
    }
    bytes = (bytes + 255) & ~(size_t)255;
    if (bytes == 0) bytes = 256;
    if ((size_t)(device_space + ((size_t)1 << DEVICE_SPACE_BITS) - device_next) < bytes) return NULL;
    void *p = device_next;
    device_next += bytes;
    return p;
}

static char fake_handles[64];
static cudaStream_t capture_stream;
/* The streams the open capture holds, as the runtime tracks them: the capturing stream, and every stream that waited
 * for an event recorded on one of them (cudaStreamIsCapturing says Active for those only). */
enum { CAPTURED_MAX = 64 };
static cudaStream_t captured[CAPTURED_MAX];
static int n_captured;
static int is_captured(cudaStream_t stream) {
    for (int i = 0; i < n_captured; ++i)
        if (captured[i] == stream) return 1;
    return 0;
}
static void join_capture(cudaStream_t stream) {
    if (!is_captured(stream) && n_captured < CAPTURED_MAX) captured[n_captured++] = stream;
}
static cudaGraph_t capture_into; /* the graph a cudaStreamBeginCaptureToGraph captures into, NULL: a new one */
static int capture_broken;        /* a call the runtime forbids on a capturing stream was made: the capture fails */
static char fake_bodies[64];     /* a conditional node's body graphs: owned by its graph, never destroyed alone */

cudaError_t __wrap_cudaGetDeviceCount(int *count) {
    ++fake.cuda_calls;
    *count = fake.device_count;
    return fake.device_count ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t __wrap_cudaDeviceGetPCIBusId(char *id, int len, int device) {
    (void)device;
    ++fake.cuda_calls;
    if (!fake.pci_bus_id) return fake_pending = cudaErrorNoDevice;
    snprintf(id, (size_t)len, "%s", fake.pci_bus_id_string ? fake.pci_bus_id_string : "0000:99:00.0");
    return cudaSuccess;
}

cudaError_t __wrap_cudaGetDevice(int *device) {
    ++fake.cuda_calls;
    *device = 0;
    return fake.fail_get_device ? (fake_pending = cudaErrorDevicesUnavailable) : cudaSuccess;
}
/* The device cudaSetDevice last made current on this thread: every stream but fake.foreign_stream is its (the
 * default streams are the current device's; the fakes do not remember where a stream was made). */
static _Thread_local int current_device;
cudaError_t __wrap_cudaStreamGetDevice(cudaStream_t stream, int *device) {
    ++fake.cuda_calls;
    *device = fake.foreign_stream && stream == fake.foreign_stream ? 1 : current_device;
    /* on a stream being captured the runtime answers, but the capture is invalidated (CUDA 13.0, measured) */
    if (fake.capturing || (fake.captures_open > 0 && is_captured(stream))) capture_broken = 1;
    return cudaSuccess;
}
cudaError_t __wrap_cudaSetDevice(int device) {
    ++fake.cuda_calls;
    if (device >= fake.device_count) return fake_pending = cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}
/* Without fake.compute_capability, 132 whatever is asked (the SM count; the compute capability 132.132 is no 9.0, so
 * the library takes no sm_90a route). With it, an H100/H200 of that compute capability (a B200 for 100: 148 SMs,
 * 126 MiB of L2): 132 SMs, 50 MiB of L2, the 227 KiB shared-memory opt-in; 132 for anything else. */
cudaError_t __wrap_cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    (void)device;
    ++fake.cuda_calls;
    *value = 132;
    if (!fake.compute_capability) return cudaSuccess;
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = fake.compute_capability / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *value = fake.compute_capability % 10; break;
    case cudaDevAttrMultiProcessorCount: *value = fake.compute_capability >= 100 ? 148 : 132; break;
    case cudaDevAttrL2CacheSize: *value = (fake.compute_capability >= 100 ? 126 : 50) << 20; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = FAKE_SMEM_OPTIN; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrClusterLaunch: *value = 1; break;
    default: break;
    }
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    (void)flags;
    if (!fake_create()) return fake_pending = cudaErrorUnknown;
    *stream = (cudaStream_t)fake_handle(); /* each stream its own handle: a test can tell them apart */
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned flags, int priority) {
    (void)flags, (void)priority;
    if (!fake_create()) return fake_pending = cudaErrorUnknown;
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
    if (fake.on_stream_sync) fake.on_stream_sync(stream);
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
    ++fake.cuda_calls;
    if (fake.on_is_capturing) fake.on_is_capturing();
    const int capturing = fake.capturing || (fake.captures_open > 0 && is_captured(stream));
    *status = capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
    (void)flags;
    if (!fake_create()) return fake_pending = cudaErrorUnknown;
    /* each event its own handle (the log tells them apart), whose 16 bytes hold the device clock at its last record
     * (autotune's timing, cudaEventElapsedTime) and that record's stream (what a wait waits on) */
    *event = (cudaEvent_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventCreate(cudaEvent_t *event) { return __wrap_cudaEventCreateWithFlags(event, 0); }
cudaError_t __wrap_cudaEventSynchronize(cudaEvent_t event) {
    (void)event;
    ++fake.cuda_calls;
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    ++fake.cuda_calls;
    double t0, t1;
    memcpy(&t0, (const void *)start, sizeof t0);
    memcpy(&t1, (const void *)end, sizeof t1);
    *ms = (float)((t1 - t0) / 1000.0);
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t event) {
    fake_release(event);
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (fake_fault(FAKE_EVENT_RECORD)) return fake_pending = cudaErrorLaunchFailure;
    if (event) {
        memcpy((void *)event, &fake.clock_us, sizeof fake.clock_us);
        memcpy((char *)event + sizeof fake.clock_us, &stream, sizeof stream);
        double done = 0.0;
        if (fake.events_apart_s > 0) {
            const double now = monotonic_s();
            done = (fake.events_last_done_s > now ? fake.events_last_done_s : now) + fake.events_apart_s;
            fake.events_last_done_s = done;
        }
        memcpy((char *)event + 16, &done, sizeof done);
    }
    ++fake.enqueued;
    fake_entry *e = log_entry(FAKE_OP_RECORD, stream);
    if (e) e->event = event;
    return cudaSuccess;
}
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
    (void)flags;
    if (fake_fault(FAKE_WAIT_EVENT)) return fake_pending = cudaErrorInvalidResourceHandle;
    ++fake.enqueued;
    fake.last_wait_stream = stream;
    fake.last_wait_at = fake.enqueued;
    if (event) memcpy(&fake.last_wait_on, (const char *)event + sizeof(double), sizeof fake.last_wait_on);
    if (event && fake.captures_open > 0 && is_captured(fake.last_wait_on)) join_capture(stream);
    fake_entry *e = log_entry(FAKE_OP_WAIT, stream);
    if (e) e->event = event;
    return cudaSuccess;
}
cudaError_t __wrap_cudaMalloc(void **ptr, size_t bytes) {
    if (fake_fault(FAKE_MALLOC)) return fake_pending = cudaErrorMemoryAllocation;
    void *p = fake.device_space ? device_space_take(bytes) : malloc(16); /* never dereferenced: with malloc, a unique
                                                                           * address whose leak the sanitizers see */
    if (!p) return fake_pending = cudaErrorMemoryAllocation;
    if (!fake_create()) {
        if (!in_device_space(p)) free(p);
        return fake_pending = cudaErrorMemoryAllocation;
    }
    *ptr = p;
    return cudaSuccess;
}
cudaError_t __wrap_cudaFree(void *ptr) {
    if (fake.on_free) fake.on_free(ptr);
    if (ptr) --fake.live;
    if (!in_device_space(ptr)) free(ptr);
    return cudaSuccess;
}
cudaError_t __wrap_cudaGetLastError(void) {
    const cudaError_t e = fake_pending;
    fake_pending = cudaSuccess;
    return e;
}
cudaError_t __wrap_cudaPeekAtLastError(void) { return fake_pending; }
cudaError_t __wrap_cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    (void)src, (void)kind;
    if (fake_fault(FAKE_MEMCPY)) return fake_pending = cudaErrorLaunchFailure; /* counts the call */
    if (kind == cudaMemcpyDeviceToHost) memset(dst, 0, bytes), fake.sync_copy_from = src;
    if (kind == cudaMemcpyDeviceToHost && fake.on_sync_copy_to_host) fake.on_sync_copy_to_host(dst, bytes);
    return cudaSuccess;
}
cudaError_t __wrap_cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
    ++fake.cuda_calls;
    ++fake.enqueued;
    fake_entry *e = log_entry(FAKE_OP_MEMCPY, stream);
    fake_log_range(e, src, bytes, FAKE_READS);
    fake_log_range(e, dst, bytes, FAKE_WRITES);
    if (kind == cudaMemcpyDeviceToHost && fake.on_copy_to_host) fake.on_copy_to_host(dst, bytes);
    return cudaSuccess;
}
cudaError_t __wrap_cudaMallocHost(void **ptr, size_t bytes) {
    if (!fake_create()) return fake_pending = cudaErrorMemoryAllocation;
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
    const int error = atomic_load(&fake.streams_error);
    if (error) return (cudaError_t)error;
    return fake.streams_busy ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t __wrap_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
    *mode = cudaStreamCaptureModeGlobal; /* the previous mode; the watchdog's thread only */
    return cudaSuccess;
}
cudaError_t __wrap_cudaEventQuery(cudaEvent_t event) {
    (void)event;
    const int error = atomic_load(&fake.events_error);
    if (error) return (cudaError_t)error;
    double done = 0.0;
    if (event) memcpy(&done, (const char *)event + 16, sizeof done);
    if (done > 0 && monotonic_s() < done) return cudaErrorNotReady;
    return fake.events_busy ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t __wrap_cudaMemset(void *dst, int value, size_t bytes) {
    (void)value, (void)bytes;
    ++fake.cuda_calls;
    fake.memset_at = dst;
    ++fake.memsets;
    return cudaSuccess;
}
cudaError_t __wrap_cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    (void)value;
    ++fake.cuda_calls;
    ++fake.enqueued;
    fake_log_range(log_entry(FAKE_OP_MEMSET, stream), dst, bytes, FAKE_WRITES);
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
    attr->device = -1;
    const uintptr_t p = (uintptr_t)ptr;
    if (p >= fake.foreign_lo && p < fake.foreign_hi) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = 1;
    } else if (p >= fake.host_lo && p < fake.host_hi)
        attr->type = fake.host_pinned ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
    else if (p >= fake.managed_lo && p < fake.managed_hi)
        attr->type = cudaMemoryTypeManaged;
    else
        attr->type = cudaMemoryTypeDevice;
    return cudaSuccess;
}
/* The kernel's handle is its host function: a launch finds its name. */
cudaError_t __wrap___cudaGetKernel(cudaKernel_t *kernel, const void *func) {
    *kernel = (cudaKernel_t)func;
    return cudaSuccess;
}
/* What the runtime refuses of a launch's shape, as far as the fake can know it: an empty grid or block, a block of
 * more than 1024 threads, more dynamic shared memory than the kernel may use (48 KiB unless cudaFuncSetAttribute
 * raised it), a cluster of more than FAKE_MAX_CLUSTER CTAs or one that does not divide the grid. */
static cudaError_t launch_refused(const kernel_entry *k, dim3 grid, dim3 block, size_t smem, dim3 cluster) {
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu || !threads ||
        threads > 1024)
        return fake_pending = cudaErrorInvalidConfiguration;
    const size_t smem_max = k && k->max_dyn_smem > FAKE_SMEM_DEFAULT ? (size_t)k->max_dyn_smem : FAKE_SMEM_DEFAULT;
    if (smem > smem_max) return fake_pending = cudaErrorInvalidValue;
    const unsigned long long ctas = (unsigned long long)cluster.x * cluster.y * cluster.z;
    if (!ctas || ctas > FAKE_MAX_CLUSTER || grid.x % cluster.x || grid.y % cluster.y || grid.z % cluster.z)
        return fake_pending = cudaErrorInvalidClusterSize;
    return cudaSuccess;
}

/* A launch that passed (`cluster`: with a cluster-dimension attribute): counted for its kernel, logged with what
 * fake_kernel_reach adds. */
static void launched(const void *fn, cudaStream_t stream, void **args, dim3 grid, int cluster) {
    ++fake.enqueued;
    ++fake.launches;
    fake.clock_us += fake.launch_us;
    fake.cluster_launches += cluster != 0;
    kernel_entry *k = kernel_of(fn);
    if (k) ++k->launches;
    else ++fake.unnamed_launches;
    fake_entry *e = log_entry(FAKE_OP_KERNEL, stream);
    log_kernel_args(e, fn, args);
    if (e && fake_kernel_reach) fake_kernel_reach(e, e->kernel, args, grid);
}

/* A failed launch leaves its error for cudaGetLastError, as the runtime does for <<<>>>. */
cudaError_t __wrap___cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared,
                                      cudaStream_t stream) {
    if (fake_fault(FAKE_LAUNCH)) return fake_pending = cudaErrorLaunchOutOfResources;
    const void *fn = (const void *)kernel;
    const cudaError_t refused = launch_refused(kernel_of(fn), grid, block, shared, (dim3){1, 1, 1});
    if (refused != cudaSuccess) {
        ++fake.refused_launches;
        return fake_pending = refused;
    }
    launched(fn, stream, args, grid, 0);
    return cudaSuccess;
}
/* The cluster shape of a cudaLaunchConfig_t ({1, 1, 1} without the attribute); *has: whether it has one. */
static dim3 config_cluster(const cudaLaunchConfig_t *config, int *has) {
    dim3 cluster = {1, 1, 1};
    *has = 0;
    for (unsigned i = 0; i < config->numAttrs; ++i)
        if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
            cluster = (dim3){config->attrs[i].val.clusterDim.x, config->attrs[i].val.clusterDim.y,
                             config->attrs[i].val.clusterDim.z};
            *has = 1;
        }
    return cluster;
}
/* cudaLaunchKernelEx (<cuda_runtime.h>'s template) with its attributes: a priority, a cluster shape. Counted as
 * every launch is (FAKE_LAUNCH's faults, fake.enqueued, the kernel's count, the log); a cluster launch also in
 * fake.cluster_launches. A refused launch leaves its error for cudaGetLastError too, as every failed runtime call does. */
cudaError_t __wrap_cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
    if (fake_fault(FAKE_LAUNCH)) return fake_pending = cudaErrorLaunchOutOfResources;
    int has_cluster = 0;
    const dim3 cluster = config_cluster(config, &has_cluster);
    const cudaError_t refused =
        launch_refused(kernel_of(func), config->gridDim, config->blockDim, config->dynamicSmemBytes, cluster);
    if (refused != cudaSuccess) {
        ++fake.refused_launches;
        return fake_pending = refused;
    }
    launched(func, config->stream, args, config->gridDim, has_cluster);
    return cudaSuccess;
}
/* The opt-in to more than 48 KiB of dynamic shared memory (up to FAKE_SMEM_OPTIN), which launches and occupancy
 * queries then allow; other attributes are accepted and ignored. */
cudaError_t __wrap_cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    ++fake.cuda_calls;
    ++fake.func_attributes;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || value > FAKE_SMEM_OPTIN) return fake_pending = cudaErrorInvalidValue;
    kernel_entry *k = kernel_of(func);
    if (k) k->max_dyn_smem = value;
    return cudaSuccess;
}
/* Clusters of the configuration's shape that fit at once: fake.cluster_capacity[ctas] (an H200's unless a test
 * changes it); fake.fail_occupancy fails the query (a device that cannot run the kernel). The configuration must
 * be launchable (launch_refused), its shared memory opted into first. */
cudaError_t __wrap_cudaOccupancyMaxActiveClusters(int *clusters, const void *func, const cudaLaunchConfig_t *config) {
    ++fake.cuda_calls;
    ++fake.occupancy_queries;
    *clusters = 0;
    if (fake.fail_occupancy) return fake_pending = cudaErrorInvalidDeviceFunction;
    int has_cluster = 0;
    const dim3 cluster = config_cluster(config, &has_cluster);
    const dim3 one_cluster = {cluster.x, cluster.y, cluster.z}; /* the query's grid may be any: check one cluster */
    const cudaError_t refused =
        launch_refused(kernel_of(func), one_cluster, config->blockDim, config->dynamicSmemBytes, cluster);
    if (refused != cudaSuccess) return refused;
    *clusters = fake.cluster_capacity[cluster.x * cluster.y * cluster.z];
    return cudaSuccess;
}

/* cuTensorMapEncodeTiled as the driver checks its arguments (the documented rules kernels/tma.cuh's maps meet). No
 * kernel reads the map: it holds zeros but for its first word, the global address, so that the log of enqueued work
 * (a kernel's class arguments' words) sees the memory a TMA kernel reaches through its maps. Counted in
 * fake.tensor_maps; a refusal in fake.refused_tensor_maps. */
static CUresult CUDAAPI fake_encode_tiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
                                          const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                          const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
                                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                          CUtensorMapFloatOOBfill oob) {
    (void)l2, (void)oob;
    ++fake.tensor_maps;
    size_t elem = 0;
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: elem = 1; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        elem = 2; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: elem = 4; break;
    default: elem = 8; break;
    }
    int ok = map && rank >= 1 && rank <= 5 && address && (uintptr_t)address % 16 == 0 &&
             interleave == CU_TENSOR_MAP_INTERLEAVE_NONE;
    for (cuuint32_t i = 0; ok && i < rank; ++i) {
        ok = dims[i] >= 1 && dims[i] <= (1ull << 32) && box[i] >= 1 && box[i] <= 256 && elem_strides[i] >= 1 &&
             elem_strides[i] <= 8;
        if (ok && i + 1 < rank) ok = strides[i] % 16 == 0 && strides[i] < (1ull << 40);
    }
    if (ok) ok = box[0] * elem % 16 == 0; /* the inner box dimension in bytes */
    const size_t swizzle_bytes = swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? 128
                                 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                                 : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
                                                                        : 0;
    if (ok && swizzle_bytes) ok = box[0] * elem <= swizzle_bytes;
    if (ok) {
        memset(map, 0, sizeof *map);
        memcpy(map, &address, sizeof address);
        return CUDA_SUCCESS;
    }
    ++fake.refused_tensor_maps;
    return CUDA_ERROR_INVALID_VALUE;
}
/* The driver's entry points: cuTensorMapEncodeTiled is fake_encode_tiled, whatever the device (kernels/tma.cuh keeps
 * the first answer for the process); anything else is not found. */
cudaError_t __wrap_cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *found) {
    (void)version, (void)flags;
    ++fake.cuda_calls;
    const int known = strcmp(symbol, "cuTensorMapEncodeTiled") == 0;
    *fn = known ? (void *)(uintptr_t)fake_encode_tiled : NULL;
    if (found) *found = known ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

/* ---- graphs ---- */
cudaError_t __wrap_cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    (void)mode;
    if (fake_fault(FAKE_BEGIN_CAPTURE)) return fake_pending = cudaErrorStreamCaptureUnsupported;
    capture_stream = stream;
    capture_into = NULL;
    if (fake.captures_open == 0) n_captured = 0, capture_broken = 0;
    join_capture(stream);
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
    if (fake.captures_open == 0) n_captured = 0;
    *graph = NULL;
    const int broken = capture_broken;
    capture_broken = 0;
    if (fake_fault(FAKE_END_CAPTURE) || broken) return fake_pending = cudaErrorStreamCaptureInvalidated;
    if (capture_into) { /* the runtime hands back the graph captured into: nothing new is alive */
        *graph = capture_into;
        capture_into = NULL;
        return cudaSuccess;
    }
    if (!fake_create()) return fake_pending = cudaErrorMemoryAllocation;
    *graph = (cudaGraph_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphCreate(cudaGraph_t *graph, unsigned flags) {
    (void)flags;
    if (!fake_create()) return fake_pending = cudaErrorMemoryAllocation;
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
        if (params->conditional.size > sizeof fake_bodies) return fake_pending = cudaErrorInvalidValue;
        for (unsigned i = 0; i < params->conditional.size; ++i) bodies[i] = (cudaGraph_t)&fake_bodies[i];
        params->conditional.phGraph_out = bodies;
    }
    *node = (cudaGraphNode_t)&fake_handles[9];
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)graph, (void)flags;
    *exec = NULL;
    if (fake_fault(FAKE_INSTANTIATE)) return fake_pending = cudaErrorInvalidValue;
    if (!fake_create()) return fake_pending = cudaErrorMemoryAllocation;
    *exec = (cudaGraphExec_t)fake_handle();
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info) {
    (void)exec, (void)graph;
    memset(info, 0, sizeof *info);
    if (fake_fault(FAKE_EXEC_UPDATE)) return fake_pending = cudaErrorGraphExecUpdateFailure;
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphExecDestroy(cudaGraphExec_t exec) {
    fake_release(exec);
    return cudaSuccess;
}
cudaError_t __wrap_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    (void)exec;
    if (fake_fault(FAKE_GRAPH_LAUNCH)) return fake_pending = cudaErrorLaunchFailure;
    ++fake.enqueued;
    (void)log_entry(FAKE_OP_GRAPH, stream);
    ++fake.graph_launches;
    return cudaSuccess;
}
/* DOT files are written for real, one line, so that a test sees the file the library asked for. */
cudaError_t __wrap_cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned flags) {
    (void)graph;
    ++fake.cuda_calls;
    fake.dot_flags = flags;
    FILE *f = fopen(path, "w");
    if (!f) return fake_pending = cudaErrorOperatingSystem;
    fputs("digraph fake {}\n", f);
    fclose(f);
    return cudaSuccess;
}

int fake_dot_written(const char *path, unsigned flags) {
    FILE *f = fopen(path, "r");
    if (f) fclose(f);
    remove(path);
    return f != NULL && fake.dot_flags == flags;
}

/* ---- cuBLASLt ---- */

/* A matmul descriptor's pointers and a layout's shape, behind their handles. */
typedef struct fake_desc {
    const void *bias, *aux;
    cublasLtEpilogue_t epilogue;
} fake_desc;

/* The bytes a column-major matrix of layout l spans. */
/* The bytes of one element of type t. */
static size_t type_bytes(cudaDataType t) {
    switch (t) {
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: case CUDA_R_8I: return 1;
    case CUDA_R_64F: return 8;
    default: return 4;
    }
}
static size_t layout_bytes(cublasLtMatrixLayout_t layout) {
    const fake_layout *l = (const fake_layout *)layout;
    if (!l || !l->rows || !l->cols) return 0;
    return type_bytes(l->type) * ((size_t)l->ld * (size_t)(l->cols - 1) + (size_t)l->rows);
}
/* Where the column after the last of a matrix at p with layout l starts (NULL without a layout): the first element of
 * a GEMM that continues its k there (gg_matmul_tail_apart). */
static const void *next_column(const void *p, const fake_layout *l) {
    if (!p || !l->cols) return NULL;
    return (const char *)p + type_bytes(l->type) * (size_t)l->ld * (size_t)l->cols;
}
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
    *desc = (cublasLtMatmulDesc_t)calloc(1, sizeof(fake_desc));
    if (!*desc) {
        --fake.live;
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    fake_release(desc);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                                     const void *buf, size_t bytes) {
    (void)bytes;
    fake_desc *d = (fake_desc *)desc;
    if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE) {
        d->epilogue = *(const cublasLtEpilogue_t *)buf;
        fake.epilogues[fake.n_epilogues++ % FAKE_MAX_EPILOGUES] = d->epilogue;
    }
    if (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER) memcpy(&fake.bias_pointer, buf, sizeof fake.bias_pointer);
    if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER) memcpy(&fake.aux_pointer, buf, sizeof fake.aux_pointer);
    if (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER) memcpy(&d->bias, buf, sizeof d->bias);
    if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER) memcpy(&d->aux, buf, sizeof d->aux);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t __wrap_cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
    if (!fake_create()) return CUBLAS_STATUS_ALLOC_FAILED;
    fake_layout *l = malloc(sizeof *l);
    if (!l) {
        --fake.live;
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *l = (fake_layout){type, rows, cols, ld};
    *layout = (cublasLtMatrixLayout_t)l;
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
    int offered = fake.heuristic_count > 1 ? fake.heuristic_count : 1;
    offered = offered > FAKE_MAX_CANDIDATES ? FAKE_MAX_CANDIDATES : offered < requested ? offered : requested;
    for (int i = 0; i < offered; ++i) {
        memset(&results[i], 0, sizeof results[i]);
        results[i].state = CUBLAS_STATUS_SUCCESS;
        /* cuBLASLt's own setters: the algorithm's configuration is host data */
        if (fake.heuristic_count > 1) { /* the tag: an option the library never reads (its ID cannot be set) */
            const uint32_t tag = FAKE_ALGO_TAG0 + (uint32_t)i;
            (void)cublasLtMatmulAlgoConfigSetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &tag,
                                                       sizeof tag);
        }
    }
    if (fake.heuristic_split_k > 0) {
        const uint32_t split = (uint32_t)fake.heuristic_split_k;
        (void)cublasLtMatmulAlgoConfigSetAttribute(&results[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                                   sizeof split);
    }
    *found = offered;
    return CUBLAS_STATUS_SUCCESS;
}
/* The real check would read the fakes' handles as its own: a re-shaped or re-configured algorithm (matmul.c) is
 * vouched for only with fake.algo_check_ok, and then only without split-k. */
cublasStatus_t __wrap_cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo,
                                              cublasLtMatmulHeuristicResult_t *result) {
    (void)h, (void)op, (void)a, (void)b, (void)c, (void)d;
    ++fake.cuda_calls;
    uint32_t split = 0;
    size_t written = 0;
    if (fake.algo_check_ok &&
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split, &written) ==
            CUBLAS_STATUS_SUCCESS &&
        split <= 1) {
        memset(result, 0, sizeof *result);
        result->algo = *algo;
        result->state = CUBLAS_STATUS_SUCCESS;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
/* The fake heuristic's index of algo (its tag less FAKE_ALGO_TAG0), or -1: not one of its tagged candidates. */
static int fake_candidate(const cublasLtMatmulAlgo_t *algo) {
    uint32_t tag = 0;
    size_t written = 0;
    if (!algo || cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &tag, sizeof tag,
                                                      &written) != CUBLAS_STATUS_SUCCESS)
        return -1;
    return tag >= FAKE_ALGO_TAG0 && tag < FAKE_ALGO_TAG0 + FAKE_MAX_CANDIDATES ? (int)(tag - FAKE_ALGO_TAG0) : -1;
}
cublasStatus_t __wrap_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b,
                                     const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
                                     cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t *algo, void *ws,
                                     size_t ws_bytes, cudaStream_t stream) {
    (void)h, (void)alpha, (void)beta;
    if (fake_fault(FAKE_MATMUL)) return CUBLAS_STATUS_EXECUTION_FAILED;
    const int candidate = fake_candidate(algo);
    if (candidate >= 0 && (fake.algo_fail_mask >> candidate & 1u)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (candidate >= 0) {
        ++fake.algo_runs[candidate];
        fake.clock_us += fake.algo_us[candidate];
    } else {
        ++fake.algo_runs_untagged;
    }
    ++fake.enqueued;
    fake.dgelu_matmuls += ((const fake_desc *)d)->epilogue == CUBLASLT_EPILOGUE_DGELU;
    /* a tail after its first part, adding to its D on its stream; or before it, beside it on another stream into a sum
     * of its own (gg_matmul_run_split_in), the first part then starting where the tail's A and B begin */
    const int after = previous_matmul.stream == stream && previous_matmul.D == D && beta &&
                      *(const float *)beta == 1.0f && A == next_column(previous_matmul.A, &previous_matmul.a) &&
                      B == next_column(previous_matmul.B, &previous_matmul.b);
    const int before = a && b && previous_matmul.stream != stream && previous_matmul.D != D &&
                       previous_matmul.A == next_column(A, (const fake_layout *)a) &&
                       previous_matmul.B == next_column(B, (const fake_layout *)b);
    fake.tail_matmuls += after || before;
    fake.tail_matmuls_beside += before;
    previous_matmul.stream = stream, previous_matmul.A = A, previous_matmul.B = B, previous_matmul.D = D;
    memset(&previous_matmul.a, 0, sizeof previous_matmul.a);
    memset(&previous_matmul.b, 0, sizeof previous_matmul.b);
    if (a) previous_matmul.a = *(const fake_layout *)a;
    if (b) previous_matmul.b = *(const fake_layout *)b;
    fake_entry *e = log_entry(FAKE_OP_MATMUL, stream);
    if (!e) return CUBLAS_STATUS_SUCCESS;
    fake_log_range(e, A, layout_bytes(a), FAKE_READS);
    fake_log_range(e, B, layout_bytes(b), FAKE_READS);
    fake_log_range(e, C, layout_bytes(c), FAKE_READS);
    fake_log_range(e, D, layout_bytes(dl), FAKE_WRITES);
    fake_log_range(e, ws, ws_bytes, FAKE_WRITES);
    const fake_desc *fd = (const fake_desc *)d;
    fake_log_range(e, fd->bias, 1, FAKE_WRITES); /* read or written by the epilogue: the order is checked either way */
    fake_log_range(e, fd->aux, 1, FAKE_WRITES);
    return CUBLAS_STATUS_SUCCESS;
}
