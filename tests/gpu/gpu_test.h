/* gpu_test.h - what the GPU test executables share: skipping without a GPU, CUDA checks, a context, the cases. */
#ifndef GG_GPU_TEST_H
#define GG_GPU_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "case_runner.h"
#include "gradgraph.h"

/* The GPUs this process sees (0 without a driver or device). */
static inline int gpu_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    (void)cudaGetLastError();
    return n;
}

static inline int have_gpu(void) { return gpu_count() > 0; }

/* Ends the whole run with exit code 3 and "<message>" on stderr if it is still going after `seconds` (a test of
 * code that could hang must fail, not wait forever). message must outlive the run (a string literal). */
static const char *gg_watchdog_message;
static void gg_watchdog_fired(int sig) {
    (void)sig;
    const char *m = gg_watchdog_message;
    size_t n = 0;
    while (m[n]) ++n;
    (void)!write(2, m, n); /* async-signal-safe */
    _exit(3);
}
static inline void start_watchdog(unsigned seconds, const char *message) {
    gg_watchdog_message = message;
    signal(SIGALRM, gg_watchdog_fired);
    alarm(seconds);
}

/* Without a GPU the test is skipped: cmocka prints "[  SKIPPED ]" and CTest reports the executable as skipped. */
#define REQUIRE_GPU()                                                                                              \
    do {                                                                                                           \
        if (!have_gpu()) skip();                                                                                   \
    } while (0)

#define CUDA_OK(call)                                                                                              \
    do {                                                                                                           \
        int rc_ = (int)(call);                                                                                     \
        if (rc_ != 0) fail_msg("%s: %s", #call, cudaGetErrorString((cudaError_t)rc_));                            \
    } while (0)

/* A test that needs `gib` GiB of free GPU memory is skipped, saying so, on a GPU with less (tests of tensors past
 * 2^31 elements: an H100's 80 GB holds them, smaller GPUs do not). */
#define REQUIRE_FREE_GPU_GIB(gib)                                                                                  \
    do {                                                                                                           \
        size_t free_ = 0, total_ = 0;                                                                              \
        CUDA_OK(cudaMemGetInfo(&free_, &total_));                                                                  \
        if (free_ < ((size_t)(gib) << 30)) {                                                                       \
            printf("%s: %zu MiB free, %d GiB needed: skipped\n", __func__, free_ >> 20, (int)(gib));               \
            skip();                                                                                                \
        }                                                                                                          \
    } while (0)

#define GG_OK(ctx, call)                                                                                           \
    do {                                                                                                           \
        gg_status st_ = (call);                                                                                    \
        if (st_ != GG_SUCCESS) fail_msg("%s: %s", #call, gg_last_error(ctx));                                      \
    } while (0)

static inline gg_ctx *new_ctx(void) {
    gg_ctx *ctx = NULL;
    if (gg_ctx_create(NULL, &ctx) != GG_SUCCESS) fail_msg("gg_ctx_create: %s", gg_last_error(NULL));
    return ctx;
}

static inline gg_case_run *new_run(const gg_case *c) {
    gg_case_run *r = NULL;
    char err[256];
    if (gg_case_run_create(c, NULL, &r, err, sizeof err) != 0) fail_msg("%s", err);
    return r;
}

/* The 64 cases of tests/data/cases.csv. */
static inline int load_all_cases(gg_case *cases) {
    char err[256];
    const int n = gg_cases_load(GG_CASES_FILE, cases, GG_CASES_MAX, err, sizeof err);
    if (n < 0) fail_msg("%s", err);
    return n;
}

/* The GEMM modes of a block: the three fp32 modes for blocks 2 and 3, bf16 for 1 and 4. */
static inline int block_modes(int block_id, gg_precision modes[3]) {
    if (block_id == 2 || block_id == 3) {
        modes[0] = GG_PRECISION_FP32;
        modes[1] = GG_PRECISION_TF32;
        modes[2] = GG_PRECISION_FP16;
        return 3;
    }
    modes[0] = GG_PRECISION_BF16;
    return 1;
}

/* Element j of output tensor t in a host copy (fp32 or bf16), as a double. */
static inline double host_value(const gg_tensor *t, const void *base, size_t j) {
    if (t->elem == GG_ELEM_F32) return ((const float *)base)[j];
    const uint32_t bits = (uint32_t)((const uint16_t *)base)[j] << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Compares host copies of a run's outputs (gg_case_outputs_to_host): an element of `got` matches when it is within
 * atol + rtol·|e| of e = scale × `expected`, scale being param_scale for the parameter gradients and 1 for the
 * activation gradients, rtol fp32_rtol for fp32 tensors and bf16_rtol for bf16 ones. 1 when every tensor matches on
 * at least min_ratio of its elements; else 0, after printing the first tensor that does not. */
static inline int outputs_match(const gg_case_run *r, const void *expected, const void *got, double param_scale,
                                double atol, double fp32_rtol, double bf16_rtol, double min_ratio) {
    size_t at = 0;
    for (int o = 0; o < r->n_out; ++o) {
        const gg_tensor *t = &r->out[o];
        const size_t n = gg_case_tensor_elems(t);
        const double scale = t->param ? param_scale : 1, rtol = t->elem == GG_ELEM_F32 ? fp32_rtol : bf16_rtol;
        size_t ok = 0;
        for (size_t j = 0; j < n; ++j) {
            const double e = scale * host_value(t, (const char *)expected + at, j);
            ok += fabs(host_value(t, (const char *)got + at, j) - e) <= atol + rtol * fabs(e);
        }
        if ((double)ok < min_ratio * (double)n) {
            fprintf(stderr, "  %s: %zu of %zu elements match (x%g)\n", t->name, ok, n, scale);
            return 0;
        }
        at += n * t->elem;
    }
    return 1;
}

/* splitmix64: small, seedable, the same sequence everywhere (the random shapes, stacks and data of the tests). */
static inline uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1), 53 bits. */
static inline double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }
/* Uniform in [lo, hi] (lo when hi <= lo). */
static inline int64_t next_range(uint64_t *s, int64_t lo, int64_t hi) {
    return hi <= lo ? lo : lo + (int64_t)(next_u64(s) % (uint64_t)(hi - lo + 1));
}

/* The fast GEMM mode of a block: fp16 operands for the fp32 blocks, bf16 for the others. */
static inline gg_precision speed_mode(int block_id) {
    return block_id == 2 || block_id == 3 ? GG_PRECISION_FP16 : GG_PRECISION_BF16;
}

/* A step's gradient callback for the step tests (gg_step_add_gradient_callback): copies of gradient buffers as they
 * are when the callback's work runs, to hold against the buffers the run leaves. */
enum { GRAD_COPIES_MAX = 64 };
typedef struct grad_copies {
    int n;
    void *grads[GRAD_COPIES_MAX], *copies[GRAD_COPIES_MAX];
    size_t bytes[GRAD_COPIES_MAX];
} grad_copies;

/* n buffers (grads[i], bytes[i] each) and a copy of each (cudaMalloc); returns 0, or -1 (what it made is freed by
 * grad_copies_free). */
static inline int grad_copies_make(grad_copies *g, void *const *grads, const size_t *bytes, int n) {
    memset(g, 0, sizeof *g);
    if (n < 1 || n > GRAD_COPIES_MAX) return -1;
    for (int i = 0; i < n; ++i) {
        g->grads[i] = grads[i], g->bytes[i] = bytes[i];
        if (cudaMalloc(&g->copies[i], bytes[i]) != cudaSuccess) return -1;
        g->n = i + 1;
    }
    return 0;
}

/* The callback: every copy enqueued on the step's stream. */
static inline void grad_copies_take(void *user, gg_stream stream, int64_t tokens) {
    const grad_copies *g = user;
    (void)tokens;
    for (int i = 0; i < g->n; ++i)
        (void)cudaMemcpyAsync(g->copies[i], g->grads[i], g->bytes[i], cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
}

/* Poisons the copies (0xff bytes: NaN), so that a copy the callback did not make differs. */
static inline int grad_copies_poison(const grad_copies *g) {
    for (int i = 0; i < g->n; ++i)
        if (cudaMemset(g->copies[i], 0xff, g->bytes[i]) != cudaSuccess) return -1;
    return 0;
}

/* How many elem-byte elements of the buffers differ from their copies now (the device synchronized first); *total:
 * how many were compared. Returns (size_t)-1 when a copy to the host fails. */
static inline size_t grad_copies_differ(const grad_copies *g, size_t elem, size_t *total) {
    size_t differ = 0;
    *total = 0;
    if (cudaDeviceSynchronize() != cudaSuccess) return (size_t)-1;
    for (int i = 0; i < g->n; ++i) {
        unsigned char *a = malloc(g->bytes[i]), *b = malloc(g->bytes[i]);
        const int ok = a && b && cudaMemcpy(a, g->grads[i], g->bytes[i], cudaMemcpyDeviceToHost) == cudaSuccess &&
                       cudaMemcpy(b, g->copies[i], g->bytes[i], cudaMemcpyDeviceToHost) == cudaSuccess;
        for (size_t j = 0; ok && j + elem <= g->bytes[i]; j += elem) differ += memcmp(a + j, b + j, elem) != 0;
        *total += g->bytes[i] / elem;
        free(a);
        free(b);
        if (!ok) return (size_t)-1;
    }
    return differ;
}

static inline void grad_copies_free(grad_copies *g) {
    for (int i = 0; i < g->n; ++i) cudaFree(g->copies[i]);
    g->n = 0;
}

/* Runs the tests whose names match GG_TEST_FILTER (a cmocka pattern) when it is set, and not those that match
 * GG_TEST_SKIP (compute-sanitizer's runs leave out the tests of tensors past 2^31 elements: "*past_32_bit*"). */
static inline void apply_test_filter(void) {
    if (getenv("GG_TEST_FILTER")) cmocka_set_test_filter(getenv("GG_TEST_FILTER"));
    if (getenv("GG_TEST_SKIP")) cmocka_set_skip_filter(getenv("GG_TEST_SKIP"));
}

#endif
