/*
 * test_soak_gpu.c - a soak of graph replays (label `gpu`; SKIPPED without a GPU; scripts/device.sh runs it): block
 * 1's graph over power-of-two buckets from 128 to 4096 tokens, replayed GG_SOAK_REPLAYS times (default 100 000)
 * with M cycling through exact and padded sizes; every 1000 replays the outputs are compared bit for bit with the
 * eager call of the same M (block 1's sums are deterministic), and the device's free memory must stay where it was
 * after the first round. Prints `SOAK {"replays": n, "failures": f, "memory_drift_bytes": d}`.
 */
#include "gpu_test.h"

enum { H = 1024, MAX_M = 4096, CHECK_EVERY = 1000 };
static const int64_t sizes[] = {128, 200, 256, 999, 1024, 3000, 4096};
#define N_SIZES (int)(sizeof sizes / sizeof sizes[0])

static uint16_t *device_bf16(size_t n, unsigned seed) {
    uint16_t *host = malloc(n * sizeof *host), *dev = NULL;
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        const float v = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        host[i] = (uint16_t)(bits >> 16);
    }
    CUDA_OK(cudaMalloc((void **)&dev, n * sizeof *dev));
    CUDA_OK(cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice));
    free(host);
    return dev;
}

static void soak(void **state) {
    (void)state;
    REQUIRE_GPU();
    const char *env = getenv("GG_SOAK_REPLAYS");
    const long replays = env ? atol(env) : 100000;
    gg_ctx *ctx = new_ctx();
    const size_t big = (size_t)MAX_M * H;
    gg_tanh_gate_args a = {device_bf16(big, 1), device_bf16(1, 2), device_bf16(big, 3), device_bf16(MAX_M, 4),
                           device_bf16(big, 5), device_bf16(big, 6), device_bf16(1, 7)};
    /* the eager results of every M, bit patterns on the host */
    uint16_t *want[N_SIZES], *got = malloc(big * sizeof *got);
    uint16_t want_gate[N_SIZES], got_gate = 0;
    for (int s = 0; s < N_SIZES; ++s) {
        gg_tanh_gate_desc d = {sizes[s], H, 0};
        GG_OK(ctx, gg_tanh_gate_backward(ctx, &d, &a, NULL));
        want[s] = malloc((size_t)sizes[s] * H * sizeof *want[s]);
        CUDA_OK(cudaMemcpy(want[s], a.grad_hidden_states, (size_t)sizes[s] * H * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&want_gate[s], a.grad_gate, 2, cudaMemcpyDeviceToHost));
    }
    gg_tanh_gate_desc d = {MAX_M, H, 0};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = MAX_M;
    gg_graph *g = NULL;
    GG_OK(ctx, gg_tanh_gate_graph_create(ctx, &d, &gc, &g));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    size_t free0 = 0, free1 = 0, total = 0;
    long failures = 0, drift = 0;
    for (long i = 0; i < replays; ++i) {
        const int s = (int)(i % N_SIZES);
        d.tokens = sizes[s];
        const gg_status st = gg_tanh_gate_graph_run(g, &d, &a, (gg_stream)stream);
        if (st != GG_SUCCESS) {
            printf("SOAK FAIL replay %ld (M = %lld): %s\n", i, (long long)d.tokens, gg_last_error(ctx));
            ++failures;
            break;
        }
        if ((i + 1) % CHECK_EVERY == 0 || i + 1 == replays) {
            CUDA_OK(cudaStreamSynchronize(stream));
            const size_t n = (size_t)sizes[s] * H;
            CUDA_OK(cudaMemcpy(got, a.grad_hidden_states, n * 2, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(&got_gate, a.grad_gate, 2, cudaMemcpyDeviceToHost));
            if (memcmp(got, want[s], n * 2) != 0 || got_gate != want_gate[s]) {
                printf("SOAK FAIL replay %ld (M = %lld): differs from the eager call\n", i, (long long)d.tokens);
                ++failures;
            }
            CUDA_OK(cudaMemGetInfo(&free1, &total));
            if (i + 1 == CHECK_EVERY) free0 = free1; /* every bucket's exec exists by now */
            else if (free0) drift = labs((long)free0 - (long)free1) > drift ? labs((long)free0 - (long)free1) : drift;
        }
    }
    printf("SOAK {\"replays\": %ld, \"failures\": %ld, \"memory_drift_bytes\": %ld}\n", replays, failures, drift);
    gg_graph_destroy(g);
    cudaStreamDestroy(stream);
    for (int s = 0; s < N_SIZES; ++s) free(want[s]);
    free(got);
    void **all = (void **)&a;
    for (size_t i = 0; i < sizeof a / sizeof(void *); ++i) cudaFree(all[i]);
    gg_ctx_destroy(ctx);
    assert_int_equal(failures, 0);
    assert_true(drift < (2l << 20)); /* flat: the driver hands out memory in 2 MiB pieces */
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(soak)};
    return cmocka_run_group_tests_name("soak_gpu", tests, NULL, NULL);
}
