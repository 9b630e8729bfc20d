/*
 * test_shapes_gpu.c - correct on every shape, not only the benchmark's (label `gpu`; SKIPPED without a GPU).
 *
 * Per block, shapes drawn at random: tokens log-uniform from 1 to 100 000, or just below, at and just above every
 * token threshold where the library changes its route or schedule; hidden dimensions multiples of 8 whose largest
 * power-of-two factor is drawn from 8, 16, 32, 64 and 128 (so most are not what the fast kernels take), or shapes
 * the fast kernels take; SiLU on and off; every precision mode of the block; autotune on for a quarter of them.
 * Each shape runs eagerly on fresh random inputs against the float64 GPU reference, and passes when, for every
 * output tensor t:
 *   - at least 99 % of its elements are within tol = k·rms(ref_t) + rtol·|ref| (the spec's rule, with an atol that
 *     scales with the tensor as the spec's own atol does with M; k is the precision's operand rounding, with room:
 *     2e-4 in FP32, 4e-3 with TF32 or fp16 operands, 2^-8 for bf16; 2^-16 for block 4's weight and bias gradients,
 *     one rounding of an fp32 sum, for the weight's growing with the tokens past 12000: atol_factor),
 *   - no element is off by more than 10 tol, none is NaN or Inf (outputs are poisoned with NaN before each call),
 *   - the 4 KiB guard regions before and after every output still hold their pattern (no out-of-bounds write).
 * GG_SHAPES_PER_BLOCK (default 12) shapes per block, from GG_SHAPES_SEED (default 1; scripts/device.sh runs a few
 * hundred from a fresh seed). Every failure prints the seed and the shape; GG_SHAPE=block,M,dim0,dim1,silu,autotune
 * runs one.
 * Each block prints "SHAPES {json}" with its counts, which scripts/device.sh collects.
 * shapes_past_32_bit_indices checks one shape per block whose largest tensors pass 2^31 elements (see there).
 */
#include "gpu_test.h"

#define GUARD_BYTES 4096
#define MAX_TOKENS 100000
#define MAX_ELEMS 150000000.0 /* the largest tensor of a shape, in elements: keeps the reference's memory bounded */
#define MAX_FLOP 3e12         /* the reference's fp64 GEMMs per shape */
#define CONTEXT_SHAPES 24     /* shapes per context: plans accumulate in a context's cache */

typedef struct shape {
    int block;
    int64_t M, a, b; /* tokens; H (1), D, F (2, 3), H, E (4) */
    int silu;
    int autotune;
} shape;

typedef struct tally {
    int checked, failures;
    size_t guard_bytes_changed;
} tally;

/* Tokens at which a block changes route or schedule (src/blocks, and a dW GEMM's tail apart from 10240 in
 * src/gemm/matmul.c): drawn at -1, 0 and +1. */
static const int64_t thresholds[5][8] = {
    [1] = {1, 132, 264, 528, 1056, 4096},          /* one CTA per token up to the grid's cap of a few per SM */
    [2] = {1, 256, 320, 512, 640, 1024, 2048, 10240}, /* fp16 mode: gemm_f32w's token tiles (256 and the wide 320), */
    [3] = {1, 256, 320, 512, 640, 1024, 2048, 10240}, /* TF32 G / gemm_f32w up to 512 and 1024 tokens */
    [4] = {1, 256, 1500, 10000, 10240, 32768, 65536}, /* one-launch kernel, narrow schedule rows, fused kernel */
};

static int64_t draw_tokens(uint64_t *s, int block) {
    if (next_unit(s) < 0.3) {
        int n = 0;
        while (n < 8 && thresholds[block][n]) ++n;
        const int64_t t = thresholds[block][next_range(s, 0, n - 1)] + next_range(s, -1, 1);
        return t < 1 ? 1 : t;
    }
    return (int64_t)floor(exp(next_unit(s) * log((double)MAX_TOKENS)));
}

/* A multiple of 8 in [8, hi] whose largest power-of-two factor is `align` (8..128), or any multiple of align when
 * align is 128; 8 when hi is below align. */
static int64_t draw_dim(uint64_t *s, int64_t hi, int64_t align) {
    if (hi < align) align = 8;
    if (hi < 8) return 8;
    const int64_t k_max = hi / align;
    int64_t k = next_range(s, 1, k_max);
    if (align < 128 && k % 2 == 0) k = k > 1 ? k - 1 : 1; /* odd: the factor is exactly align */
    return k * align;
}

static int64_t draw_align(uint64_t *s) { return (int64_t)8 << next_range(s, 0, 4); }

/* A random shape of the block, within the reference's budgets. With probability 1/3, dimensions the fast kernels
 * take (block 4: H % 64, E % 128; blocks 2/3: D and F % 128), else any alignment. */
static shape draw_shape(uint64_t *s, int block) {
    shape sh = {block, draw_tokens(s, block), 8, 8, (int)(next_u64(s) & 1), next_unit(s) < 0.25};
    const double M = (double)sh.M;
    const int fast = next_unit(s) < 1.0 / 3;
    const int64_t elem_cap = (int64_t)(MAX_ELEMS / M);
    switch (block) {
    case 1:
        sh.a = draw_dim(s, elem_cap < 8192 ? elem_cap : 8192, draw_align(s));
        sh.b = 0;
        break;
    case 2:
    case 3: {
        const int64_t cap = elem_cap < 4096 ? elem_cap : 4096;
        sh.a = draw_dim(s, cap, fast ? 128 : draw_align(s));
        int64_t b_cap = (int64_t)(MAX_FLOP / (8.0 * M * (double)sh.a));
        if (b_cap > cap) b_cap = cap;
        sh.b = draw_dim(s, b_cap, fast ? 128 : draw_align(s));
        break;
    }
    case 4: {
        const int64_t cap = elem_cap < 4096 ? elem_cap : 4096;
        sh.b = draw_dim(s, cap, fast ? 128 : draw_align(s)); /* E */
        int64_t a_cap = (int64_t)(MAX_FLOP / (4.0 * M * (double)sh.b));
        if (a_cap > 4096) a_cap = 4096;
        sh.a = draw_dim(s, a_cap, fast ? 64 : draw_align(s)); /* H */
        break;
    }
    }
    return sh;
}

/* The rule's k: the relative size of one rounding of the mode's GEMM operands, with room for a few of them. */
static double rms_factor(gg_precision p) {
    switch (p) {
    case GG_PRECISION_FP32: return 2e-4;
    case GG_PRECISION_TF32:
    case GG_PRECISION_FP16: return 4e-3;
    default: return 1.0 / 256; /* bf16 */
    }
}

/* The atol's k of one output: the mode's (rms_factor), but for block 4's weight and bias gradients, each one rounding
 * of an fp32 sum over the tokens: near 0 only that sum's own rounding parts them from the reference, far below a bf16
 * rounding of the tensor's scale. There a bf16 k passed a sum rounded twice (its first part rounded to bf16), which
 * this k fails: 10.5x the tolerance at 11912 tokens, 768 x 1536. Past GRAD_WEIGHT_FLOOR_TOKENS tokens grad_weight's k
 * grows with them: the tensor cores' fp32 accumulation of its GEMM (cuBLASLt's, as any bf16 GEMM's) adds an error that
 * grows about as fast as the tokens relative to the tensor's rms (their sum grows as their square root, each add's
 * error with the sum): at H = 3776, E = 528 elements near 0 were off by up to 10.9-11x the one-rounding k at 99175 and
 * 99200 tokens (one algorithm, no split-k; 0.05 % of them), within it at 24793, 49587 and 74432 (one H200). */
#define GRAD_WEIGHT_FLOOR_TOKENS 12000.0
static double atol_factor(int block, const char *output, gg_precision p, int64_t tokens) {
    if (block == 4 && !strcmp(output, "grad_weight"))
        return (tokens > GRAD_WEIGHT_FLOOR_TOKENS ? (double)tokens / GRAD_WEIGHT_FLOOR_TOKENS : 1.0) / 65536;
    if (block == 4 && !strcmp(output, "grad_bias")) return 1.0 / 65536;
    return rms_factor(p);
}

static gg_ctx *shape_ctx(int autotune) {
    gg_config config = GG_CONFIG_INIT;
    config.autotune = autotune;
    config.tune_cache_path = ""; /* choices in memory only: the sweep never writes the user's cache */
    gg_ctx *ctx = NULL;
    if (gg_ctx_create(&config, &ctx) != GG_SUCCESS) fail_msg("gg_ctx_create: %s", gg_last_error(NULL));
    return ctx;
}

static void describe(const shape *sh, gg_precision p, char *out, size_t n) {
    snprintf(out, n, "GG_SHAPE=%d,%lld,%lld,%lld,%d,%d (%s)", sh->block, (long long)sh->M, (long long)sh->a,
             (long long)sh->b, sh->silu, sh->autotune, gg_precision_string(p));
}

/* How a shape's call runs: eagerly, or through a graph whose one bucket is PAD_ROWS tokens larger, so that the call
 * is padded (its [M, ...] tensors staged into bucket-sized buffers, the padding rows zeroed, the outputs copied
 * back), its bucket picked on the host or, device-selected, on the GPU from M in device memory. */
typedef enum { RUN_EAGER = 1, RUN_PADDED = 2, RUN_DEVICE_SELECTED = 4 } run_kind;
#define PAD_ROWS 64

static const char *run_name(run_kind k) {
    return k == RUN_EAGER ? "eager" : k == RUN_PADDED ? "padded graph" : "device-selected graph";
}

/* One run of the call (outputs poisoned and guards filled first); GG_SUCCESS once its work is done. A graph is made
 * for the run and destroyed after it, so that its staging never outlives it. */
static gg_status run_once(gg_ctx *ctx, gg_case_run *r, gg_precision p, run_kind kind, const int64_t *device_tokens) {
    CUDA_OK(gg_case_poison(r));
    CUDA_OK(gg_case_guards_fill(r));
    gg_status st = GG_SUCCESS;
    if (kind == RUN_EAGER) {
        st = gg_case_execute(r, ctx, p);
    } else {
        const int64_t bucket = r->c.tokens + PAD_ROWS;
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        gc.policy = GG_BUCKETS_LIST;
        gc.bucket_tokens = &bucket;
        gc.n_buckets = 1;
        gc.device_select = kind == RUN_DEVICE_SELECTED;
        gg_graph *g = NULL;
        st = gg_case_graph_create(r, ctx, p, &gc, &g);
        if (st == GG_SUCCESS)
            st = kind == RUN_PADDED ? gg_case_graph_run(r, g, p) : gg_case_graph_run_device(r, g, p, device_tokens);
        if (st == GG_SUCCESS) CUDA_OK(cudaDeviceSynchronize()); /* the run's stream does not wait for the default one */
        gg_graph_destroy(g);
    }
    if (st == GG_SUCCESS && kind == RUN_EAGER) CUDA_OK(cudaDeviceSynchronize());
    return st;
}

/* Runs one shape in every precision mode of its block, each in every kind of run `runs` has (run_kind bits); returns
 * the number of (shape, mode, run) triples that failed. */
static int check_shape_runs(gg_ctx *ctx, const shape *sh, uint64_t data_seed, int runs, tally *t) {
    gg_case c;
    memset(&c, 0, sizeof c);
    c.block_id = sh->block;
    snprintf(c.block, sizeof c.block, "%s-shape", gg_case_block_short(sh->block));
    c.batch_size = 1;
    c.seq_len = c.tokens = sh->M;
    c.dim0 = sh->a;
    c.dim1 = sh->b;
    c.use_silu_gate = sh->silu;
    const int bf16_block = sh->block == 1 || sh->block == 4;
    gg_case_run *r = NULL;
    char err[256];
    if (gg_case_run_create_guarded(&c, NULL, GUARD_BYTES, &r, err, sizeof err) != 0) fail_msg("%s", err);
    CUDA_OK(gg_case_prepare(r, data_seed));
    double rms[GG_RUN_MAX_TENSORS];
    for (int o = 0; o < r->n_out; ++o) {
        const size_t n = gg_case_tensor_elems(&r->out[o]);
        double sum = 0;
        CUDA_OK(gg_h_sum_squares_f64(r->out[o].ref, n, r->compare_scratch, r->stream, &sum));
        rms[o] = sqrt(sum / (double)n);
    }
    int64_t *device_tokens = NULL;
    if (runs & RUN_DEVICE_SELECTED) {
        CUDA_OK(cudaMalloc((void **)&device_tokens, sizeof *device_tokens));
        CUDA_OK(cudaMemcpy(device_tokens, &sh->M, sizeof sh->M, cudaMemcpyHostToDevice));
    }
    gg_precision modes[3];
    const int n_modes = block_modes(sh->block, modes);
    int failed = 0;
    for (int m = 0; m < n_modes; ++m)
        for (run_kind kind = RUN_EAGER; kind <= RUN_DEVICE_SELECTED; kind = (run_kind)(kind << 1)) {
            if (!(runs & kind)) continue;
            char what[200];
            describe(sh, modes[m], what, sizeof what);
            if (kind != RUN_EAGER) snprintf(what + strlen(what), sizeof what - strlen(what), " %s", run_name(kind));
            const gg_status st = run_once(ctx, r, modes[m], kind, device_tokens);
            ++t->checked;
            if (st != GG_SUCCESS) {
                fprintf(stderr, "SHAPE FAIL %s: %s: %s\n", what, gg_status_string(st), gg_last_error(ctx));
                ++failed;
                continue;
            }
            const double k = rms_factor(modes[m]);
            const double rtol = bf16_block ? 0.05 : k;
            int bad = 0;
            for (int o = 0; o < r->n_out; ++o) {
                const gg_tensor *out = &r->out[o];
                const size_t n = gg_case_tensor_elems(out);
                const double ka = atol_factor(sh->block, out->name, modes[m], sh->M);
                const double atol = ka * rms[o] > 1e-30 ? ka * rms[o] : 1e-30;
                gg_h_compare_result res;
                if (out->elem == GG_ELEM_F32)
                    CUDA_OK(gg_h_compare_f32(out->dev, out->ref, n, atol, rtol, r->compare_scratch, r->stream, &res));
                else
                    CUDA_OK(gg_h_compare_bf16(out->dev, out->ref, n, atol, rtol, r->compare_scratch, r->stream, &res));
                const int ok =
                    (double)res.matched >= 0.99 * (double)res.n && res.nonfinite == 0 && res.worst_ratio <= 10;
                if (!ok) {
                    fprintf(stderr,
                            "SHAPE FAIL %s: %s: %llu of %llu within tol (atol %.3g = %.3g x rms, rtol %.3g), "
                            "%llu NaN/Inf, worst |err|/tol %.3g\n",
                            what, out->name, (unsigned long long)res.matched, (unsigned long long)res.n, atol, ka,
                            rtol, (unsigned long long)res.nonfinite, res.worst_ratio);
                    bad = 1;
                }
            }
            size_t changed = 0;
            const char *guard_tensor = NULL;
            CUDA_OK(gg_case_guards_check(r, &changed, &guard_tensor));
            if (changed) {
                fprintf(stderr, "SHAPE FAIL %s: %zu guard bytes around %s were written\n", what, changed, guard_tensor);
                t->guard_bytes_changed += changed;
                bad = 1;
            }
            failed += bad;
        }
    CUDA_OK(cudaFree(device_tokens));
    gg_case_run_destroy(r);
    t->failures += failed;
    return failed;
}

static int check_shape(gg_ctx *ctx, const shape *sh, uint64_t data_seed, tally *t) {
    return check_shape_runs(ctx, sh, data_seed, RUN_EAGER, t);
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : fallback;
}

/* GG_SHAPE=block,M,dim0,dim1,silu[,autotune]: that one shape instead of the sweep (for reproducing a failure). */
static int env_shape(int block, shape *sh) {
    const char *v = getenv("GG_SHAPE");
    long long b, M, a, d1;
    int silu = 0, autotune = 0;
    if (!v || sscanf(v, "%lld,%lld,%lld,%lld,%d,%d", &b, &M, &a, &d1, &silu, &autotune) < 4) return 0;
    if (b != block) return -1;
    *sh = (shape){block, M, a, d1, silu != 0, autotune != 0};
    return 1;
}

static void sweep(int block) {
    REQUIRE_GPU();
    const uint64_t seed = env_u64("GG_SHAPES_SEED", 1);
    const int per_block = (int)env_u64("GG_SHAPES_PER_BLOCK", 12);
    const char *hopper = getenv("GG_HOPPER_KERNELS");
    const int hopper_on = !(hopper && strcmp(hopper, "0") == 0);
    shape one;
    const int single = env_shape(block, &one);
    if (single < 0) skip();
    uint64_t s = seed * 0x100000001B3ull + (uint64_t)block;
    tally t = {0, 0, 0};
    gg_ctx *ctx[2] = {NULL, NULL}; /* autotune off, on */
    const int n = single ? 1 : per_block;
    for (int i = 0; i < n; ++i) {
        const shape sh = single ? one : draw_shape(&s, block);
        if (i % CONTEXT_SHAPES == 0)
            for (int k = 0; k < 2; ++k) {
                gg_ctx_destroy(ctx[k]);
                ctx[k] = shape_ctx(k);
            }
        check_shape(ctx[sh.autotune], &sh, seed * 7919u + (uint64_t)i, &t);
    }
    for (int k = 0; k < 2; ++k) gg_ctx_destroy(ctx[k]);
    printf("SHAPES {\"block\": %d, \"seed\": %llu, \"shapes\": %d, \"checked\": %d, \"failures\": %d, "
           "\"guard_bytes_changed\": %zu, \"hopper_kernels\": %d}\n",
           block, (unsigned long long)seed, n, t.checked, t.failures, t.guard_bytes_changed, hopper_on);
    fflush(stdout);
    if (t.failures)
        fail_msg("block %d: %d of %d shape/mode runs failed (GG_SHAPES_SEED=%llu; each is listed above)", block,
                 t.failures, t.checked, (unsigned long long)seed);
}

static void shapes_tanh_gate(void **state) { (void)state; sweep(1); }
static void shapes_gelu_ffn(void **state) { (void)state; sweep(2); }
static void shapes_mlp(void **state) { (void)state; sweep(3); }
static void shapes_ssm_gate(void **state) { (void)state; sweep(4); }

/* Shapes that once gave wrong elements, kept as they were found. Block 4 at 333 tokens, E = 1544: the chain's
 * warps split between its unrolled loop and its tail, and a lane dropped g's L2 line before the other lanes of the
 * line had read it (16 elements of each activation gradient near 1e38, or stale values). Block 4 at 65537 and
 * 32769 tokens in the narrow schedule (the second with GG_HOPPER_KERNELS=0): cuBLASLt's split-k algorithm for dW
 * under an SM count target wrote 1-2 % of grad_weight wrong (src/gemm/matmul.c, keep_unsplit); at 1344 x 768 and
 * 2880 x 1408 (GG_HOPPER_KERNELS=0) the heuristic offered only split-k algorithms, which keep_unsplit re-configures;
 * at 65537 tokens, 1472 x 256, the fused route's dW (no SM target) took split-k 8 and was wrong too: an odd k from
 * 32768 ran without split-k. Block 2 at 27137 tokens, 1152 x 2112 (fp16): both dW GEMMs wrong on 13 % of their
 * elements (up to 25x), with no SM target. Block 3 at 4225 tokens, 3104 x 24 (fp16), and block 4 at 11905: split-k at
 * k 1 more than a multiple of 128, 30-40 % of dW wrong (up to 46x). Blocks 2 at 32393 tokens (1536 x 64) and 3 at
 * 86405 (1280 x 640), fp16, autotune on, with 32392 and 86404 rows of k run apart in split-k: dW wrong, up to 27x.
 * Split-k now runs only at a k that is a multiple of 128 (gg_matmul_split_k_untrusted, gg_matmul_tail_apart).
 * Block 3 at 513 tokens, F = 320 (fp16, sm_90a): dX took gemm_f32w but G, whose F it cannot take, was not planned
 * at all (cuBLASLt refused the empty descriptors: src/blocks/ffn.c, g_reads_w2_copy). */
static void shapes_found_wrong(void **state) {
    (void)state;
    REQUIRE_GPU();
    static const shape found[] = {
        {4, 333, 776, 1544, 0, 0},    {4, 333, 776, 1544, 1, 0},  {4, 333, 768, 1544, 1, 0},
        {4, 333, 768, 1544, 0, 0},    {4, 65537, 3760, 360, 0, 0}, {4, 32769, 704, 2176, 1, 0},
        {4, 32769, 1344, 768, 0, 0},  {4, 65537, 2880, 1408, 0, 1}, {4, 65537, 1472, 256, 0, 0},
        {3, 513, 2816, 320, 0, 0},    {2, 513, 2816, 320, 0, 0},  {2, 27137, 1152, 2112, 0, 0},
        {3, 4225, 3104, 24, 0, 0},    {3, 8193, 3104, 24, 0, 0},  {4, 11905, 768, 1536, 0, 0},
        {2, 32393, 1536, 64, 1, 1},   {3, 86405, 1280, 640, 0, 1},
    };
    tally t = {0, 0, 0};
    gg_ctx *ctx = shape_ctx(0);
    for (size_t i = 0; i < sizeof found / sizeof found[0]; ++i)
        for (uint64_t round = 0; round < 3; ++round) check_shape(ctx, &found[i], 100 * i + round, &t);
    gg_ctx_destroy(ctx);
    if (t.failures) fail_msg("%d of %d runs of shapes once found wrong failed again", t.failures, t.checked);
}

/* The large shapes' tests: each shape in a context of its own (a plan's scratch stays with its context), in the runs
 * given (run_kind bits), its largest tensor asserted to pass 2^31 `unit`s ("elements" or "bytes": what the test is
 * for); prints `label` {...}, fails on any failed run. */
static void check_large(const shape *large, size_t n, uint64_t seed, int runs, const char *label, const char *unit) {
    tally t = {0, 0, 0};
    for (size_t i = 0; i < n; ++i) {
        const int64_t elems = large[i].M * (large[i].b ? large[i].b : large[i].a);
        const int elem_bytes = large[i].block == 1 || large[i].block == 4 ? 2 : 4; /* bf16 blocks; fp32 ones */
        const int64_t size = strcmp(unit, "bytes") == 0 ? elems * elem_bytes : elems;
        assert_true(size > INT32_MAX);
        gg_ctx *ctx = shape_ctx(large[i].autotune);
        check_shape_runs(ctx, &large[i], seed + i, runs, &t);
        gg_ctx_destroy(ctx);
    }
    printf("%s {\"checked\": %d, \"failures\": %d, \"guard_bytes_changed\": %zu}\n", label, t.checked, t.failures,
           t.guard_bytes_changed);
    if (t.failures) fail_msg("%d of %d runs with tensors past 2^31 %s failed", t.failures, t.checked, unit);
}

/* Tensors of more than 2^31 elements (8.7 GB in fp32), one shape per block, every mode: an element index or a byte
 * offset held in 32 bits anywhere (a kernel, a launch's size, a GEMM's dimensions) would write the wrong elements or
 * none. The sweep stays below 1.5e8 elements a tensor (its reference's memory); users' token counts per call reach
 * these sizes (262144 tokens: 32 sequences of 8192). The largest needs ~50 GB of GPU memory (its inputs, the
 * float64 reference's work and the plan's scratch): skipped, saying so, on a GPU with less than
 * LARGE_TENSORS_MIN_GIB. */
#define LARGE_TENSORS_MIN_GIB 64
static void shapes_past_32_bit_indices(void **state) {
    (void)state;
    REQUIRE_GPU();
    REQUIRE_FREE_GPU_GIB(LARGE_TENSORS_MIN_GIB);
    static const shape large[] = {
        {1, 270000, 8000, 0, 0, 0},  /* 2.16e9 elements a tensor */
        {2, 262144, 64, 8320, 0, 1}, /* act, x and G: 2.18e9 */
        {3, 262144, 64, 8320, 0, 0},
        {4, 262144, 64, 8320, 1, 0}, /* the gate, the SSM output and g: 2.18e9 */
    };
    check_large(large, sizeof large / sizeof large[0], 4242, RUN_EAGER, "LARGE", "elements");
}

/* The same through padded graphs, host- and device-selected: what a graph adds to an eager call is staging, copies of
 * every [M, ...] tensor into bucket-sized buffers and back, the padding rows zeroed, whose byte offsets pass 2^31
 * (and 2^32 where a tensor passes 4 GiB) here; the GEMMs and kernels run at the bucket's M + 64 rows, as
 * shapes_past_32_bit_indices runs them eagerly. Block 1's tensors pass 2^31 elements too: with its float64
 * references (35 GB) and the staged copies (17 GB) it needs ~70 GB; the others are sized to need less (skipped,
 * saying so, with less free). */
#define LARGE_GRAPHS_MIN_GIB 72

static void graphs_past_32_bit_offsets(void **state) {
    (void)state;
    REQUIRE_GPU();
    REQUIRE_FREE_GPU_GIB(LARGE_GRAPHS_MIN_GIB);
    static const shape large[] = {
        {1, 270000, 8000, 0, 0, 0},  /* 2.16e9 elements, 4.3 GB a tensor */
        {2, 140000, 64, 8320, 0, 0}, /* x, act, tanh_inner: 1.16e9 fp32 elements, 4.7 GB */
        {3, 140000, 64, 8320, 0, 0},
        {4, 150000, 64, 8000, 1, 0}, /* the gate, the SSM output, ... 1.2e9 bf16 elements, 2.4 GB */
    };
    check_large(large, sizeof large / sizeof large[0], 4343, RUN_PADDED | RUN_DEVICE_SELECTED, "LARGE_GRAPHS",
                "bytes");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes_found_wrong), cmocka_unit_test(shapes_tanh_gate),
        cmocka_unit_test(shapes_gelu_ffn),    cmocka_unit_test(shapes_mlp),
        cmocka_unit_test(shapes_ssm_gate),    cmocka_unit_test(shapes_past_32_bit_indices),
        cmocka_unit_test(graphs_past_32_bit_offsets),
    };
    apply_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
