/* gpu_test.h - what the GPU test executables share: skipping without a GPU, CUDA checks, a context, the cases. */
#ifndef GG_GPU_TEST_H
#define GG_GPU_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* The fast GEMM mode of a block: fp16 operands for the fp32 blocks, bf16 for the others. */
static inline gg_precision speed_mode(int block_id) {
    return block_id == 2 || block_id == 3 ? GG_PRECISION_FP16 : GG_PRECISION_BF16;
}

/* Runs the tests whose names match GG_TEST_FILTER (a cmocka pattern) when it is set. */
static inline void apply_test_filter(void) {
    if (getenv("GG_TEST_FILTER")) cmocka_set_test_filter(getenv("GG_TEST_FILTER"));
}

#endif
