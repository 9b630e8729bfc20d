/*
 * test_fp16_gpu.c - fp16 mode's overflow word (label `gpu`; SKIPPED without a GPU): inputs in range leave it clear;
 * an input past 65504 sets it (its conversion), and so do inputs in range whose G = grad_output @ W2 and R = G *
 * gelu'(x) are not (the fp16 R, in blocks 2 and 3); the synchronous query reads what the device word holds and
 * clears it; fp32 mode never sets it.
 */
#include "gpu_test.h"

enum { M = 2048, D = 256, F = 1024 };

/* Device buffers of the FFN blocks' tensors, filled with `value` (inputs) and 0 (outputs). */
typedef struct ffn_buffers {
    float *dy, *x, *w1, *w2, *pre, *act, *dx, *dw1, *dw2, *db1, *db2;
} ffn_buffers;

static float *filled(size_t n, float value) {
    float *host = malloc(n * sizeof *host), *dev = NULL;
    for (size_t i = 0; i < n; ++i) host[i] = value * (float)((int)(i % 7) - 3) / 3.0f; /* in [-value, value] */
    CUDA_OK(cudaMalloc((void **)&dev, n * sizeof *dev));
    CUDA_OK(cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice));
    free(host);
    return dev;
}

static void set_all(float *dev, size_t n, float value) {
    float *host = malloc(n * sizeof *host);
    for (size_t i = 0; i < n; ++i) host[i] = value;
    CUDA_OK(cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice));
    free(host);
}

static ffn_buffers make_buffers(void) {
    ffn_buffers b = {filled((size_t)M * D, 1), filled((size_t)M * D, 1), filled((size_t)F * D, 0.05f),
                     filled((size_t)D * F, 0.05f), filled((size_t)M * F, 1), filled((size_t)M * F, 1),
                     filled((size_t)M * D, 0), filled((size_t)F * D, 0), filled((size_t)D * F, 0), filled(F, 0),
                     filled(D, 0)};
    return b;
}

static void free_buffers(ffn_buffers *b) {
    float **all = (float **)b;
    for (size_t i = 0; i < sizeof *b / sizeof(float *); ++i) cudaFree(all[i]);
}

static void run_ffn(gg_ctx *ctx, const ffn_buffers *b, int block, gg_precision precision) {
    if (block == 2) {
        gg_gelu_ffn_desc d = {M, D, F, precision, 0};
        gg_gelu_ffn_args a = {b->dy, b->x, b->w1, b->w2, b->pre, b->act, b->act, b->dx, b->dw1, b->dw2, NULL,
                              NULL,  NULL,   NULL,   NULL};
        GG_OK(ctx, gg_gelu_ffn_backward(ctx, &d, &a, NULL));
    } else {
        gg_mlp_desc d = {M, D, F, precision, 0};
        gg_mlp_args a = {b->dy, b->x, b->w1, b->w2, b->pre, b->act, b->dx, b->dw1, b->db1, b->dw2, b->db2, NULL,
                         NULL,  NULL,   NULL,   NULL};
        GG_OK(ctx, gg_mlp_backward(ctx, &d, &a, NULL));
    }
}

static int found(gg_ctx *ctx, int clear) {
    int f = -1;
    unsigned *word = NULL, host = 7;
    GG_OK(ctx, gg_fp16_overflow_flag(ctx, &word));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(&host, word, sizeof host, cudaMemcpyDeviceToHost));
    GG_OK(ctx, gg_fp16_overflow(ctx, &f, clear));
    assert_int_equal(f, host != 0); /* the query reads the word kernels of one's own would read */
    return f;
}

static void overflow_sets_the_flag(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int block = 2; block <= 3; ++block) {
        ffn_buffers b = make_buffers();
        run_ffn(ctx, &b, block, GG_PRECISION_FP16);
        assert_int_equal(found(ctx, 0), 0); /* every operand in range */
        /* one element of hidden_states past 65504: its conversion sets the word, which stays set until cleared */
        const float big = 1e5f;
        CUDA_OK(cudaMemcpy(b.x + 1234, &big, sizeof big, cudaMemcpyHostToDevice));
        run_ffn(ctx, &b, block, GG_PRECISION_FP16);
        assert_int_equal(found(ctx, 0), 1);
        assert_int_equal(found(ctx, 1), 1); /* read and cleared */
        assert_int_equal(found(ctx, 0), 0);
        /* fp32 mode converts nothing: the same inputs leave it clear */
        run_ffn(ctx, &b, block, GG_PRECISION_FP32);
        assert_int_equal(found(ctx, 0), 0);
        /* operands in range whose product is not: G = grad_output @ W2 = 256 * 300 * 1, R = G * gelu'(1) */
        const float x_back = 1.0f;
        CUDA_OK(cudaMemcpy(b.x + 1234, &x_back, sizeof x_back, cudaMemcpyHostToDevice));
        set_all(b.dy, (size_t)M * D, 300.0f);
        set_all(b.w2, (size_t)D * F, 1.0f);
        set_all(b.pre, (size_t)M * F, 1.0f);
        run_ffn(ctx, &b, block, GG_PRECISION_FP16);
        assert_int_equal(found(ctx, 1), 1);
        /* back in range: clear again */
        set_all(b.dy, (size_t)M * D, 1.0f);
        set_all(b.w2, (size_t)D * F, 0.01f);
        run_ffn(ctx, &b, block, GG_PRECISION_FP16);
        assert_int_equal(found(ctx, 0), 0);
        free_buffers(&b);
    }
    gg_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(overflow_sets_the_flag)};
    return cmocka_run_group_tests_name("fp16_gpu", tests, NULL, NULL);
}
