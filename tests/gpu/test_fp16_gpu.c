/*
 * test_fp16_gpu.c - fp16 mode (label `gpu`; SKIPPED without a GPU).
 * The overflow word: inputs in range leave it clear; an input past 65504 sets it (its conversion, or gg_to_fp16's),
 * and so do inputs in range whose G = grad_output @ W2 and R = G * gelu'(x) are not (the fp16 R, in blocks 2 and 3);
 * the synchronous query reads what the device word holds and clears it; fp32 mode never sets it. Block 3's R written in
 * G's DGELU epilogue sets it too when a value of R is past fp16's range. gg_check_finite
 * sets a word for an Inf or NaN anywhere in fp32 or bf16 data, and leaves it for finite data; both over more than
 * 2^31 elements where the GPU has the memory (numerics_past_32_bit_indices).
 * The fp16 copies of the operands (the *_fp16 args of blocks 2 and 3): on random inputs, at token counts on each
 * route (few tokens, where some GEMMs read the fp32 weights; the converting route; the narrow schedule), a call
 * given the copies (made by gg_to_fp16 or written by the forward) writes the same bits as the call without them,
 * eager and in a padded graph; where the copies change the schedule (the narrow schedule's G on every SM) within
 * 1e-3 of the largest element. The forward's copies are bitwise gg_to_fp16's of its fp32 outputs, and a forward
 * given the weights' copies writes the same bits as one without.
 * The pre-activation's copy (linear1_out_fp16 / intermediate_fp16), which changes the result: on each route, every
 * output with every copy given is within 2e-3 of its largest |element| of the float64 CPU reference, and no more
 * than 3x further from it (plus 1e-4 of that element) than the call without copies; block 3 both with R from the
 * gelu' pass and from G's DGELU epilogue (GG_FFN_DGELU).
 */
#include "gpu_test.h"
#include "gg_ref.h"

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

/* Block 2 or 3 at m tokens and ffn f (at most M and F: the buffers' sizes). */
static void run_ffn_at(gg_ctx *ctx, const ffn_buffers *b, int block, gg_precision precision, int64_t m, int64_t f) {
    if (block == 2) {
        gg_gelu_ffn_desc d = {m, D, f, precision, 0};
        gg_gelu_ffn_args a = {b->dy, b->x, b->w1, b->w2, b->pre, b->act, b->act, b->dx, b->dw1, b->dw2, NULL,
                              NULL,  NULL,   NULL,   NULL,  NULL};
        GG_OK(ctx, gg_gelu_ffn_backward(ctx, &d, &a, NULL));
    } else {
        gg_mlp_desc d = {m, D, f, precision, 0};
        gg_mlp_args a = {b->dy, b->x, b->w1, b->w2, b->pre, b->act, b->dx, b->dw1, b->db1, b->dw2, b->db2, NULL,
                         NULL,  NULL,   NULL,   NULL,  NULL};
        GG_OK(ctx, gg_mlp_backward(ctx, &d, &a, NULL));
    }
}

static void run_ffn(gg_ctx *ctx, const ffn_buffers *b, int block, gg_precision precision) {
    run_ffn_at(ctx, b, block, precision, M, F);
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
        /* one element of grad_output past 65504 where G is computed in TF32 from the fp32 dY (64 tokens, F = 1000: no
         * fp16 G route takes it), so that G and R stay finite and only dY's fp16 copy, dW2's operand, holds an Inf:
         * the copy's conversion must set the word (block 3 makes it inside grad_bias2's column sum) */
        CUDA_OK(cudaMemcpy(b.dy + 5, &big, sizeof big, cudaMemcpyHostToDevice));
        run_ffn_at(ctx, &b, block, GG_PRECISION_FP16, 64, 1000);
        assert_int_equal(found(ctx, 1), 1);
        set_all(b.dy, (size_t)M * D, 1.0f);
        run_ffn_at(ctx, &b, block, GG_PRECISION_FP16, 64, 1000);
        assert_int_equal(found(ctx, 0), 0);
        free_buffers(&b);
    }
    gg_ctx_destroy(ctx);
}

/* ---- the fp16 copies ---- */

enum { CM = 3000, CD = 256, CF = 1024 }; /* the largest call; dims the f32w routes take */

static float *random_dev(size_t n, float scale, uint32_t *seed) {
    float *host = malloc(n * sizeof *host), *dev = NULL;
    for (size_t i = 0; i < n; ++i) {
        *seed ^= *seed << 13, *seed ^= *seed >> 17, *seed ^= *seed << 5;
        host[i] = scale * ((float)(*seed >> 8) / 8388608.0f - 1.0f);
    }
    CUDA_OK(cudaMalloc((void **)&dev, n * sizeof *dev));
    CUDA_OK(cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice));
    free(host);
    return dev;
}

static void *fp16_of(gg_ctx *ctx, const float *src, size_t n) {
    void *dst = NULL;
    CUDA_OK(cudaMalloc(&dst, n * 2));
    GG_OK(ctx, gg_to_fp16(ctx, src, dst, n, NULL));
    return dst;
}

/* Inputs, their fp16 copies, and two sets of outputs (without and with the copies). */
typedef struct copy_io {
    float *dy, *x, *w1, *w2, *pre, *act;
    void *x16, *w1_16, *w2_16, *act16, *pre16;
    float *out[2][5]; /* dx, dw1, dw2, db1, db2 */
} copy_io;

static const size_t out_elems[5] = {(size_t)CM * CD, (size_t)CF * CD, (size_t)CD * CF, CF, CD};

static copy_io make_copy_io(gg_ctx *ctx, uint32_t seed) {
    copy_io io;
    io.dy = random_dev((size_t)CM * CD, 1, &seed), io.x = random_dev((size_t)CM * CD, 1, &seed);
    io.w1 = random_dev((size_t)CF * CD, 0.0625f, &seed), io.w2 = random_dev((size_t)CD * CF, 0.03125f, &seed);
    io.pre = random_dev((size_t)CM * CF, 2, &seed), io.act = random_dev((size_t)CM * CF, 2, &seed);
    io.x16 = fp16_of(ctx, io.x, (size_t)CM * CD), io.w1_16 = fp16_of(ctx, io.w1, (size_t)CF * CD);
    io.w2_16 = fp16_of(ctx, io.w2, (size_t)CD * CF), io.act16 = fp16_of(ctx, io.act, (size_t)CM * CF);
    io.pre16 = fp16_of(ctx, io.pre, (size_t)CM * CF);
    for (int k = 0; k < 2; ++k)
        for (int o = 0; o < 5; ++o) CUDA_OK(cudaMalloc((void **)&io.out[k][o], out_elems[o] * sizeof(float)));
    return io;
}

static void free_copy_io(copy_io *io) {
    void *p[] = {io->dy, io->x, io->w1, io->w2, io->pre, io->act, io->x16, io->w1_16, io->w2_16, io->act16, io->pre16};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i) cudaFree(p[i]);
    for (int k = 0; k < 2; ++k)
        for (int o = 0; o < 5; ++o) cudaFree(io->out[k][o]);
}

enum { NO_COPIES, EXACT_COPIES, ALL_COPIES }; /* EXACT: those that leave the result as it is; ALL: x's copy too */

/* Block `block`'s backward in fp16 mode at M tokens into output set k (poisoned first: NaN), with `copies`; eager
 * (g NULL) or a run of graph g. */
static void run_with_copies(gg_ctx *ctx, gg_graph *g, const copy_io *io, int block, int64_t M, int k, int copies) {
    for (int o = 0; o < 5; ++o) CUDA_OK(cudaMemset(io->out[k][o], 0xff, out_elems[o] * sizeof(float)));
    float *const *out = io->out[k];
    const void *x16 = copies ? io->x16 : NULL, *w1_16 = copies ? io->w1_16 : NULL;
    const void *w2_16 = copies ? io->w2_16 : NULL, *act16 = copies ? io->act16 : NULL;
    const void *pre16 = copies == ALL_COPIES ? io->pre16 : NULL;
    if (block == 2) {
        const gg_gelu_ffn_desc d = {M, CD, CF, GG_PRECISION_FP16, 0};
        const gg_gelu_ffn_args a = {io->dy, io->x,  io->w1, io->w2, io->pre, io->act, io->act, out[0], out[1],
                                    out[2], NULL,   x16,    w1_16,  w2_16,   act16,   pre16};
        GG_OK(ctx, g ? gg_gelu_ffn_graph_run(g, &d, &a, NULL) : gg_gelu_ffn_backward(ctx, &d, &a, NULL));
    } else {
        const gg_mlp_desc d = {M, CD, CF, GG_PRECISION_FP16, 0};
        const gg_mlp_args a = {io->dy, io->x,  io->w1, io->w2, io->pre, io->act, out[0], out[1],
                               out[3], out[2], out[4], NULL,   x16,    w1_16,   w2_16,  act16,  pre16};
        GG_OK(ctx, g ? gg_mlp_graph_run(g, &d, &a, NULL) : gg_mlp_backward(ctx, &d, &a, NULL));
    }
    CUDA_OK(cudaDeviceSynchronize());
}

/* Output sets 0 and 1 bitwise equal (exact) or within tol of each tensor's largest |element|; NaN never passes. */
static void outputs_agree(const copy_io *io, int block, int64_t M, int exact, const char *what) {
    const size_t n_out[5] = {(size_t)M * CD, out_elems[1], out_elems[2], out_elems[3], out_elems[4]};
    for (int o = 0; o < (block == 3 ? 5 : 3); ++o) {
        float *a = malloc(n_out[o] * sizeof *a), *b = malloc(n_out[o] * sizeof *b);
        CUDA_OK(cudaMemcpy(a, io->out[0][o], n_out[o] * sizeof *a, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(b, io->out[1][o], n_out[o] * sizeof *b, cudaMemcpyDeviceToHost));
        double scale = 0, worst = 0;
        for (size_t i = 0; i < n_out[o]; ++i) {
            if (!isfinite(a[i]) || !isfinite(b[i]))
                fail_msg("%s, block %d, M = %lld: output %d element %zu is %g / %g", what, block, (long long)M, o, i,
                         a[i], b[i]);
            scale = fmax(scale, fabs(a[i]));
            worst = fmax(worst, fabs((double)a[i] - b[i]));
        }
        if (exact && memcmp(a, b, n_out[o] * sizeof *a) != 0)
            fail_msg("%s, block %d, M = %lld: output %d differs from the call without copies (by up to %g of %g)",
                     what, block, (long long)M, o, worst, scale);
        if (worst > 1e-3 * scale)
            fail_msg("%s, block %d, M = %lld: output %d off by %g of %g", what, block, (long long)M, o, worst, scale);
        free(a), free(b);
    }
}

static void copies_give_the_same_results(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    copy_io io = make_copy_io(ctx, 20261203u);
    /* few tokens (the f32w / TF32-G routes), the converting route, the narrow schedule (G on every SM when given
     * every copy it would convert beside G: another GEMM algorithm, so within tolerance) */
    const int64_t tokens[] = {64, 700, CM};
    for (int block = 2; block <= 3; ++block)
        for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; ++t) {
            const int64_t M = tokens[t];
            run_with_copies(ctx, NULL, &io, block, M, 0, NO_COPIES);
            run_with_copies(ctx, NULL, &io, block, M, 1, EXACT_COPIES);
            outputs_agree(&io, block, M, M <= 1024, "eager");
        }
    /* a padded graph run (bucket 4096 for 3000 tokens: the copies' rows staged like the fp32 tensors') */
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 4096;
    for (int block = 2; block <= 3; ++block) {
        gg_graph *g = NULL;
        if (block == 2) {
            const gg_gelu_ffn_desc d = {CM, CD, CF, GG_PRECISION_FP16, 0};
            GG_OK(ctx, gg_gelu_ffn_graph_create(ctx, &d, &gc, &g));
        } else {
            const gg_mlp_desc d = {CM, CD, CF, GG_PRECISION_FP16, 0};
            GG_OK(ctx, gg_mlp_graph_create(ctx, &d, &gc, &g));
        }
        run_with_copies(ctx, g, &io, block, CM, 0, NO_COPIES);
        run_with_copies(ctx, g, &io, block, CM, 1, EXACT_COPIES);
        outputs_agree(&io, block, CM, 0, "padded graph");
        gg_graph_destroy(g);
    }
    free_copy_io(&io);
    gg_ctx_destroy(ctx);
}

static float *host_floats(const float *dev, size_t n) {
    float *h = malloc(n * sizeof *h);
    CUDA_OK(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

/* The largest |out - ref| of output set k's output o (n elements) and the largest |ref|; NaN fails. */
static double worst_error(const copy_io *io, int k, int o, const double *ref, size_t n, double *scale) {
    float *h = host_floats(io->out[k][o], n);
    double worst = 0;
    *scale = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(h[i])) fail_msg("output set %d, output %d: element %zu is %g", k, o, i, h[i]);
        worst = fmax(worst, fabs(h[i] - ref[i]));
        *scale = fmax(*scale, fabs(ref[i]));
    }
    free(h);
    return worst;
}

/* Counts the plans that chose R in G's DGELU epilogue (their DEBUG line). */
static void count_dgelu_plans(void *user, gg_log_level level, const char *message) {
    (void)level;
    if (strstr(message, "R in G's DGELU epilogue")) ++*(int *)user;
}

/* A context whose block-3 plans write R as GG_FFN_DGELU=`mode` says (set until the caller unsets it), counting in
 * *plans those that chose G's epilogue. */
static gg_ctx *dgelu_ctx(const char *mode, int *plans) {
    setenv("GG_FFN_DGELU", mode, 1);
    *plans = 0;
    gg_config config = GG_CONFIG_INIT;
    config.log_fn = count_dgelu_plans;
    config.log_user_data = plans;
    config.log_level = GG_LOG_DEBUG;
    gg_ctx *ctx = NULL;
    if (gg_ctx_create(&config, &ctx) != GG_SUCCESS) fail_msg("gg_ctx_create: %s", gg_last_error(NULL));
    return ctx;
}

/* The check below with block 3's R = G * gelu'(x) written the way GG_FFN_DGELU says ("pass": the gelu' pass, blocks 2
 * and 3; "epilogue": G's DGELU epilogue, block 3, whose plans above the few-token route must have chosen it). */
static void pre_activation_copy_checked(const char *dgelu) {
    const int epilogue = strcmp(dgelu, "epilogue") == 0;
    int dgelu_plans = 0;
    gg_ctx *ctx = dgelu_ctx(dgelu, &dgelu_plans);
    copy_io io = make_copy_io(ctx, 20261204u);
    const size_t all = (size_t)CM * CF;
    float *h[6] = {host_floats(io.dy, (size_t)CM * CD), host_floats(io.x, (size_t)CM * CD),
                   host_floats(io.w1, (size_t)CF * CD), host_floats(io.w2, (size_t)CD * CF), host_floats(io.pre, all),
                   host_floats(io.act, all)};
    /* the few-token route (G and dX reading the fp32 weights), the converting route, the narrow schedule */
    const int64_t tokens[] = {64, 700, 2100};
    for (int block = epilogue ? 3 : 2; block <= 3; ++block)
        for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; ++t) {
            const int64_t M = tokens[t];
            const size_t n[5] = {(size_t)M * CD, out_elems[1], out_elems[2], out_elems[3], out_elems[4]};
            double *ref[5];
            for (int o = 0; o < 5; ++o) ref[o] = calloc(n[o], sizeof(double));
            if (block == 2) /* tanh_inner: not read by the backward's math, the reference recomputes it */
                gg_ref_gelu_ffn(M, CD, CF, h[0], h[1], h[2], h[3], h[4], NULL, h[5], ref[0], ref[1], ref[2]);
            else
                gg_ref_mlp(M, CD, CF, h[0], h[1], h[2], h[3], h[4], h[5], ref[0], ref[1], ref[3], ref[2], ref[4]);
            run_with_copies(ctx, NULL, &io, block, M, 0, NO_COPIES);
            run_with_copies(ctx, NULL, &io, block, M, 1, ALL_COPIES);
            for (int o = 0; o < (block == 3 ? 5 : 3); ++o) {
                double scale = 0;
                const double plain = worst_error(&io, 0, o, ref[o], n[o], &scale);
                const double with_x16 = worst_error(&io, 1, o, ref[o], n[o], &scale);
                print_message("block %d, M = %lld, output %d (R by the %s): worst error without copies %.3g, with "
                              "x's copy %.3g, of %.3g\n", block, (long long)M, o, dgelu, plain, with_x16, scale);
                if (with_x16 > 2e-3 * scale || with_x16 > 3 * plain + 1e-4 * scale)
                    fail_msg("block %d, M = %lld, output %d: with x's fp16 copy off by %g of %g (without copies %g)",
                             block, (long long)M, o, with_x16, scale, plain);
            }
            for (int o = 0; o < 5; ++o) free(ref[o]);
        }
    for (int i = 0; i < 6; ++i) free(h[i]);
    free_copy_io(&io);
    gg_ctx_destroy(ctx);
    unsetenv("GG_FFN_DGELU");
    if (epilogue) assert_true(dgelu_plans >= 1); /* 2100 tokens (on sm_90a, G at 700 runs in gemm_f32w) */
    else assert_int_equal(dgelu_plans, 0);
}

/* Block 3 given every fp16 copy, x's too, with R forced into G's DGELU epilogue (the narrow schedule's G on every
 * SM): inputs in range leave the word clear; operands in range whose R is not (G = 256 * 300 * 1, R = G * gelu'(1),
 * rounded to Inf by the epilogue) set it, through grad_bias1's sum over R. */
static void overflow_of_r_in_g_epilogue_sets_the_flag(void **state) {
    (void)state;
    REQUIRE_GPU();
    int dgelu_plans = 0;
    gg_ctx *ctx = dgelu_ctx("epilogue", &dgelu_plans);
    ffn_buffers b = make_buffers();
    gg_mlp_desc d = {M, D, F, GG_PRECISION_FP16, 0};
    void *x16 = fp16_of(ctx, b.x, (size_t)M * D), *w1_16 = fp16_of(ctx, b.w1, (size_t)F * D);
    void *act16 = fp16_of(ctx, b.act, (size_t)M * F), *pre16 = fp16_of(ctx, b.pre, (size_t)M * F);
    void *w2_16 = fp16_of(ctx, b.w2, (size_t)D * F);
    gg_mlp_args a = {b.dy, b.x, b.w1, b.w2, b.pre, b.act, b.dx, b.dw1, b.db1, b.dw2, b.db2, NULL,
                     x16,  w1_16, w2_16, act16, pre16};
    GG_OK(ctx, gg_mlp_backward(ctx, &d, &a, NULL));
    assert_int_equal(dgelu_plans, 1);
    assert_int_equal(found(ctx, 0), 0);
    set_all(b.dy, (size_t)M * D, 300.0f);
    set_all(b.w2, (size_t)D * F, 1.0f);
    set_all(b.pre, (size_t)M * F, 1.0f);
    CUDA_OK(cudaFree(w2_16));
    CUDA_OK(cudaFree(pre16));
    a.weight2_fp16 = w2_16 = fp16_of(ctx, b.w2, (size_t)D * F);
    a.intermediate_fp16 = pre16 = fp16_of(ctx, b.pre, (size_t)M * F);
    GG_OK(ctx, gg_mlp_backward(ctx, &d, &a, NULL));
    assert_int_equal(found(ctx, 1), 1);
    void *copies[] = {x16, w1_16, w2_16, act16, pre16};
    for (int i = 0; i < 5; ++i) CUDA_OK(cudaFree(copies[i]));
    free_buffers(&b);
    gg_ctx_destroy(ctx);
    unsetenv("GG_FFN_DGELU");
}

static void pre_activation_copy_within_tolerance(void **state) {
    (void)state;
    REQUIRE_GPU();
    pre_activation_copy_checked("pass");
    pre_activation_copy_checked("epilogue");
}

/* Whether two device buffers of `bytes` hold the same bits. */
static int same_bits(const void *a, const void *b, size_t bytes) {
    char *ha = malloc(bytes), *hb = malloc(bytes);
    CUDA_OK(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
    const int same = memcmp(ha, hb, bytes) == 0;
    free(ha), free(hb);
    return same;
}

static void forward_writes_and_reads_copies(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    uint32_t seed = 77u;
    const size_t MD = (size_t)CM * CD, MF = (size_t)CM * CF;
    float *x = random_dev(MD, 1, &seed), *w1 = random_dev((size_t)CF * CD, 0.0625f, &seed);
    float *w2 = random_dev((size_t)CD * CF, 0.03125f, &seed), *b1 = random_dev(CF, 0.1f, &seed);
    float *b2 = random_dev(CD, 0.1f, &seed);
    void *w1_16 = fp16_of(ctx, w1, (size_t)CF * CD), *w2_16 = fp16_of(ctx, w2, (size_t)CD * CF);
    float *pre[2], *act[2], *out[2];
    void *x16 = NULL, *act16 = NULL, *pre16 = NULL, *x16_ref = NULL, *act16_ref = NULL, *pre16_ref = NULL;
    for (int k = 0; k < 2; ++k) {
        CUDA_OK(cudaMalloc((void **)&pre[k], MF * 4));
        CUDA_OK(cudaMalloc((void **)&act[k], MF * 4));
        CUDA_OK(cudaMalloc((void **)&out[k], MD * 4));
    }
    CUDA_OK(cudaMalloc(&x16, MD * 2));
    CUDA_OK(cudaMalloc(&act16, MF * 2));
    CUDA_OK(cudaMemset(x16, 0xff, MD * 2));
    CUDA_OK(cudaMemset(act16, 0xff, MF * 2));
    CUDA_OK(cudaMalloc(&pre16, MF * 2));
    CUDA_OK(cudaMemset(pre16, 0xff, MF * 2));
    const gg_mlp_desc d = {CM, CD, CF, GG_PRECISION_FP16, 0};
    /* without copies; then with the weights' copies read and hidden_states', the activation's and the
     * pre-activation's written */
    const gg_mlp_fwd_args plain = {x, w1, b1, w2, b2, pre[0], act[0], out[0], NULL, NULL, NULL, NULL, NULL};
    const gg_mlp_fwd_args copies = {x, w1, b1, w2, b2, pre[1], act[1], out[1], w1_16, w2_16, x16, act16, pre16};
    GG_OK(ctx, gg_mlp_forward(ctx, &d, &plain, NULL));
    GG_OK(ctx, gg_mlp_forward(ctx, &d, &copies, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    assert_true(same_bits(pre[0], pre[1], MF * 4));
    assert_true(same_bits(act[0], act[1], MF * 4));
    assert_true(same_bits(out[0], out[1], MD * 4));
    x16_ref = fp16_of(ctx, x, MD);
    act16_ref = fp16_of(ctx, act[0], MF);
    pre16_ref = fp16_of(ctx, pre[0], MF);
    CUDA_OK(cudaDeviceSynchronize());
    assert_true(same_bits(x16, x16_ref, MD * 2));
    assert_true(same_bits(act16, act16_ref, MF * 2));
    assert_true(same_bits(pre16, pre16_ref, MF * 2));
    void *all[] = {x, w1, w2, b1, b2, w1_16, w2_16, x16, act16, pre16, x16_ref, act16_ref, pre16_ref, pre[0], pre[1],
                   act[0], act[1], out[0], out[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) cudaFree(all[i]);
    gg_ctx_destroy(ctx);
}

/* gg_to_fp16 sets the overflow word for a value past 65504, and converts every element of an odd count. */
static void to_fp16_flags_and_converts(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    const float host[7] = {1.0f, -2.5f, 65504.0f, 1e-8f, 0.333333f, -65504.0f, 3.0f};
    float *src = NULL;
    uint16_t *dst = NULL, got[8];
    CUDA_OK(cudaMalloc((void **)&src, sizeof host));
    CUDA_OK(cudaMalloc((void **)&dst, sizeof got));
    CUDA_OK(cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dst, 0xff, sizeof got));
    GG_OK(ctx, gg_to_fp16(ctx, src, dst, 7, NULL));
    assert_int_equal(found(ctx, 0), 0); /* every value within ±65504 */
    CUDA_OK(cudaMemcpy(got, dst, sizeof got, cudaMemcpyDeviceToHost));
    /* 1, -2.5, 65504, 1e-8 (below the smallest subnormal: 0), 0.333333 (0x3555), -65504, 3; the 8th untouched */
    const uint16_t want[8] = {0x3c00, 0xc100, 0x7bff, 0x0000, 0x3555, 0xfbff, 0x4200, 0xffff};
    for (int i = 0; i < 8; ++i)
        if (got[i] != want[i]) fail_msg("element %d: 0x%04x, expected 0x%04x", i, got[i], want[i]);
    const float big = 70000.0f;
    CUDA_OK(cudaMemcpy(src + 6, &big, sizeof big, cudaMemcpyHostToDevice)); /* in the tail past the groups of 4 */
    GG_OK(ctx, gg_to_fp16(ctx, src, dst, 7, NULL));
    assert_int_equal(found(ctx, 1), 1);
    cudaFree(src), cudaFree(dst);
    gg_ctx_destroy(ctx);
}

/* gg_check_finite: finite fp32 and bf16 data (the largest finite values, subnormals, zeros) leave the word as it is;
 * one Inf or NaN anywhere sets it: in the 16-byte body and in the tail past it, either half of a bf16 pair. */
static void check_finite_finds_inf_and_nan(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    enum { N = 1003 }; /* 62 groups of 16 bytes and a tail of 3 fp32 / 11 bf16 */
    float host[N];
    uint16_t host16[N];
    for (int i = 0; i < N; ++i) {
        host[i] = i % 3 == 0 ? 3.4e38f : i % 3 == 1 ? -1e-42f : 0.0f; /* largest finite, subnormal, zero */
        host16[i] = i % 2 ? 0x7f7f : 0x0001;                          /* bf16's largest finite, a subnormal */
    }
    float *d = NULL;
    uint16_t *d16 = NULL;
    unsigned *flag = NULL, word = 0;
    CUDA_OK(cudaMalloc((void **)&d, sizeof host));
    CUDA_OK(cudaMalloc((void **)&d16, sizeof host16));
    CUDA_OK(cudaMalloc((void **)&flag, sizeof *flag));
    const uint32_t inf = 0x7f800000u, nan = 0x7fc00001u, ninf = 0xff800000u;
    const struct {
        int bf16, at;
        uint32_t bits; /* 0: all finite */
    } runs[] = {{0, 0, 0},     {0, N - 1, inf}, {0, 500, nan}, {0, 0, ninf},       {1, 0, 0},
                {1, N - 1, 0x7fc1}, {1, 7, 0xff80}, {1, 998, 0x7f80}, {1, 501, 0xffff}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; ++r) {
        CUDA_OK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(d16, host16, sizeof host16, cudaMemcpyHostToDevice));
        if (runs[r].bits && !runs[r].bf16)
            CUDA_OK(cudaMemcpy(d + runs[r].at, &runs[r].bits, 4, cudaMemcpyHostToDevice));
        const uint16_t b16 = (uint16_t)runs[r].bits;
        if (runs[r].bits && runs[r].bf16) CUDA_OK(cudaMemcpy(d16 + runs[r].at, &b16, 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(flag, 0, sizeof *flag));
        GG_OK(ctx, gg_check_finite(ctx, runs[r].bf16 ? (const void *)d16 : d, N, runs[r].bf16, flag, NULL));
        CUDA_OK(cudaMemcpy(&word, flag, sizeof word, cudaMemcpyDeviceToHost));
        if ((word != 0) != (runs[r].bits != 0))
            fail_msg("run %zu (%s, 0x%x at %d): the word is %u", r, runs[r].bf16 ? "bf16" : "fp32", runs[r].bits,
                     runs[r].at, word);
        if (runs[r].bits) { /* set: a finite check after it leaves it set */
            CUDA_OK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
            GG_OK(ctx, gg_check_finite(ctx, d, N, 0, flag, NULL));
            CUDA_OK(cudaMemcpy(&word, flag, sizeof word, cudaMemcpyDeviceToHost));
            assert_int_equal(word, 1);
        }
    }
    cudaFree(d), cudaFree(d16), cudaFree(flag);
    gg_ctx_destroy(ctx);
}

/* gg_to_fp16 and gg_check_finite over more than 2^31 elements (8.7 GB of fp32), where an element index or byte
 * offset held in 32 bits would convert or check only part: src holds i % 2048 (exact in fp16), dst is poisoned
 * first; every element of the last 2^26 (all those past 2^31) and of the first 2^20 is checked, and values planted
 * past 2^31 must be found. */
static void numerics_past_32_bit_indices(void **state) {
    (void)state;
    REQUIRE_GPU();
    REQUIRE_FREE_GPU_GIB(16);
    const size_t n = ((size_t)1 << 31) + ((size_t)1 << 25) + 3, far = ((size_t)1 << 31) + 7; /* a tail of 3 */
    enum { PATTERN = 2048 };
    gg_ctx *ctx = new_ctx();
    float *src = NULL, pattern[PATTERN];
    uint16_t *dst = NULL;
    unsigned *flag = NULL, word = 7;
    CUDA_OK(cudaMalloc((void **)&src, n * sizeof *src));
    CUDA_OK(cudaMalloc((void **)&dst, n * sizeof *dst));
    CUDA_OK(cudaMalloc((void **)&flag, sizeof *flag));
    for (int i = 0; i < PATTERN; ++i) pattern[i] = (float)i;
    CUDA_OK(cudaMemcpy(src, pattern, sizeof pattern, cudaMemcpyHostToDevice));
    for (size_t filled = PATTERN; filled < n; filled *= 2) /* src[i] = i % PATTERN */
        CUDA_OK(cudaMemcpy(src + filled, src, (filled < n - filled ? filled : n - filled) * sizeof *src,
                           cudaMemcpyDeviceToDevice));
    CUDA_OK(cudaMemset(dst, 0xff, n * sizeof *dst));
    (void)found(ctx, 1);
    GG_OK(ctx, gg_to_fp16(ctx, src, dst, n, NULL));
    assert_int_equal(found(ctx, 1), 0);
    const size_t tail = (size_t)1 << 26, head = (size_t)1 << 20;
    uint16_t *got = malloc(tail * sizeof *got);
    assert_non_null(got);
    const size_t starts[2] = {0, n - tail}, counts[2] = {head, tail};
    for (int part = 0; part < 2; ++part) {
        CUDA_OK(cudaMemcpy(got, dst + starts[part], counts[part] * sizeof *got, cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < counts[part]; ++k) {
            const size_t i = starts[part] + k;
            const unsigned v = (unsigned)(i % PATTERN);
            /* fp16 of the integer v < 2048: exponent 15 + floor(log2 v), 10 mantissa bits */
            unsigned e = 0;
            while ((2u << e) <= v) ++e;
            const uint16_t want = v ? (uint16_t)((15 + e) << 10 | ((v << (10 - e)) & 0x3ff)) : 0;
            if (got[k] != want)
                fail_msg("gg_to_fp16: element %zu of %zu is 0x%04x, expected 0x%04x", i, n, got[k], want);
        }
    }
    free(got);
    /* gg_check_finite: all finite, then an Inf past 2^31 (fp32), a bf16 Inf there (dst's bits, read as bf16) */
    for (int bf16 = 0; bf16 <= 1; ++bf16) {
        const void *data = bf16 ? (const void *)dst : src;
        CUDA_OK(cudaMemset(flag, 0, sizeof *flag));
        GG_OK(ctx, gg_check_finite(ctx, data, n, bf16, flag, NULL));
        CUDA_OK(cudaMemcpy(&word, flag, sizeof word, cudaMemcpyDeviceToHost));
        if (word) fail_msg("gg_check_finite (%s): finite data set the word", bf16 ? "bf16" : "fp32");
        const uint32_t inf = 0x7f800000u;
        const uint16_t inf16 = 0x7f80;
        if (bf16) CUDA_OK(cudaMemcpy(dst + far, &inf16, sizeof inf16, cudaMemcpyHostToDevice));
        else CUDA_OK(cudaMemcpy(src + far, &inf, sizeof inf, cudaMemcpyHostToDevice));
        GG_OK(ctx, gg_check_finite(ctx, data, n, bf16, flag, NULL));
        CUDA_OK(cudaMemcpy(&word, flag, sizeof word, cudaMemcpyDeviceToHost));
        if (!word)
            fail_msg("gg_check_finite (%s): an Inf at element %zu of %zu not found", bf16 ? "bf16" : "fp32", far, n);
    }
    const float big = 70000.0f; /* past fp16's range, in the last elements: the overflow word */
    CUDA_OK(cudaMemcpy(src + far, &big, sizeof big, cudaMemcpyHostToDevice));
    GG_OK(ctx, gg_to_fp16(ctx, src, dst, n, NULL));
    assert_int_equal(found(ctx, 1), 1);
    cudaFree(src), cudaFree(dst), cudaFree(flag);
    gg_ctx_destroy(ctx);
}

int main(void) {
    apply_test_filter(); /* GG_TEST_FILTER=pattern runs a subset (e.g. under compute-sanitizer) */
    const struct CMUnitTest tests[] = {cmocka_unit_test(overflow_sets_the_flag),
                                       cmocka_unit_test(copies_give_the_same_results),
                                       cmocka_unit_test(pre_activation_copy_within_tolerance),
                                       cmocka_unit_test(overflow_of_r_in_g_epilogue_sets_the_flag),
                                       cmocka_unit_test(forward_writes_and_reads_copies),
                                       cmocka_unit_test(to_fp16_flags_and_converts),
                                       cmocka_unit_test(check_finite_finds_inf_and_nan),
                                       cmocka_unit_test(numerics_past_32_bit_indices)};
    return cmocka_run_group_tests_name("fp16_gpu", tests, NULL, NULL);
}
