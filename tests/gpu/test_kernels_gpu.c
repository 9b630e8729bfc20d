/* test_kernels_gpu.c - gradgraph's kernels called directly, on shapes and arguments the blocks do not reach:
 * gg_k_round_sum, which rounds the fp32 sum of a GEMM run in two parts into its 16-bit output (src/gemm/matmul.c),
 * against a float64 computation on the CPU from the same inputs; outputs poisoned before each launch (an unwritten
 * element or a NaN fails), the padding between m and ldd never written. */
#include "gpu_test.h"

#include "kernels/gg_kernels.h"

/* Host encodings of values that both 16-bit types hold exactly (k / 16, |k| <= 64, and 0). */
static uint16_t to_bf16(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)(u >> 16);
}
static uint16_t to_f16(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) == 0) return sign;
    const int exponent = (int)((u >> 23) & 0xff) - 127 + 15; /* normal fp16 for these values */
    return (uint16_t)(sign | (uint16_t)(exponent << 10) | (uint16_t)((u >> 13) & 0x3ffu));
}
static uint16_t encode(gg_dtype t, float v) { return t == GG_DT_BF16 ? to_bf16(v) : to_f16(v); }

static double decode(gg_dtype t, uint16_t h) {
    if (t == GG_DT_BF16) {
        const uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double v = exponent == 0    ? ldexp(mantissa, -24)
               : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                : ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

static float exact_value(void) { return (float)(rand() % 129 - 64) / 16.0f; }

typedef struct {
    gg_dtype d_type;
    int64_t m, n;
    float beta;
    int part; /* a second fp32 sum (the part of a GEMM that ran on another stream) */
} round_case;

/* One launch of gg_k_round_sum against the float64 sum: within one unit in the last place of d's type (one
 * rounding). beta != 0 reads c = d in place, as an accumulating GEMM does. With a part, the two fp32 sums are added
 * in fp32 first (as a GEMM's beta-1 epilogue adds the second part over the first): the reference does the same. */
static void check_round_case(const round_case *rc) {
    const int64_t m = rc->m, n = rc->n, ldd = m + 4;
    float *sum = malloc((size_t)(m * n) * sizeof *sum), *part = malloc((size_t)(m * n) * sizeof *part);
    uint16_t *d = malloc((size_t)(n * ldd) * 2), *out = malloc((size_t)(n * ldd) * 2);
    for (int64_t i = 0; i < m * n; ++i) {
        sum[i] = (float)(rand() % 20001 - 10000) / 997.0f;
        part[i] = (float)(rand() % 20001 - 10000) / 7919.0f; /* a tail's few rows: smaller */
    }
    for (int64_t i = 0; i < n * ldd; ++i) /* old values where beta reads them, else a NaN to overwrite */
        d[i] = rc->beta != 0.0f && i % ldd < m ? encode(rc->d_type, exact_value()) : 0x7fff;
    float *d_sum, *d_part = NULL;
    void *d_d;
    CUDA_OK(cudaMalloc((void **)&d_sum, (size_t)(m * n) * sizeof *sum));
    if (rc->part) {
        CUDA_OK(cudaMalloc((void **)&d_part, (size_t)(m * n) * sizeof *part));
        CUDA_OK(cudaMemcpy(d_part, part, (size_t)(m * n) * sizeof *part, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMalloc(&d_d, (size_t)(n * ldd) * 2));
    CUDA_OK(cudaMemcpy(d_sum, sum, (size_t)(m * n) * sizeof *sum, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_d, d, (size_t)(n * ldd) * 2, cudaMemcpyHostToDevice));
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CUDA_OK(gg_k_round_sum(d_sum, d_part, d_d, rc->beta, d_d, rc->d_type, m, n, ldd, sms, 0));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(out, d_d, (size_t)(n * ldd) * 2, cudaMemcpyDeviceToHost));
    int64_t bad = 0, padding_written = 0;
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < ldd; ++i) {
            const int64_t at = j * ldd + i;
            if (i >= m) {
                padding_written += out[at] != d[at];
                continue;
            }
            const float sum32 = rc->part ? sum[j * m + i] + part[j * m + i] : sum[j * m + i];
            double ref = sum32, magnitude = fabs(ref);
            if (rc->beta != 0.0f) {
                const double t = rc->beta * decode(rc->d_type, d[at]);
                ref += t;
                magnitude += fabs(t);
            }
            const double ulp = ldexp(fabs(ref), rc->d_type == GG_DT_BF16 ? -7 : -10);
            const double got = decode(rc->d_type, out[at]);
            if (!(fabs(got - ref) <= ulp + 1e-6 * magnitude)) {
                if (bad < 3)
                    print_error("  (%lld, %lld): %.8g, expected %.8g\n", (long long)i, (long long)j, got, ref);
                ++bad;
            }
        }
    if (bad || padding_written)
        fail_msg("gg_k_round_sum d %s, %lld x %lld, beta %g, %s: %lld elements off, %lld padding elements written",
                 rc->d_type == GG_DT_BF16 ? "bf16" : "fp16", (long long)m, (long long)n, rc->beta,
                 rc->part ? "two parts" : "one part", (long long)bad, (long long)padding_written);
    CUDA_OK(cudaFree(d_sum));
    if (d_part) CUDA_OK(cudaFree(d_part));
    free(part);
    CUDA_OK(cudaFree(d_d));
    free(sum);
    free(d);
    free(out);
}

/* Both 16-bit types, with and without the old value, with and without a second part; a single group of four rows,
 * rows past one CTA's reach and columns past the grid's (it strides over both). */
static void round_sum_rounds_once(void **state) {
    (void)state;
    REQUIRE_GPU();
    srand(20261204);
    const round_case cases[] = {
        {GG_DT_BF16, 4, 1, 0.0f, 0},    {GG_DT_BF16, 68, 70, 1.0f, 0},     {GG_DT_F16, 132, 129, 0.0f, 0},
        {GG_DT_F16, 1540, 3, 1.0f, 0},  {GG_DT_BF16, 768, 1536, 1.0f, 0}, {GG_DT_BF16, 4, 70000, 0.0f, 0},
        {GG_DT_F16, 70000, 2, 0.0f, 0}, {GG_DT_BF16, 4, 1, 0.0f, 1},      {GG_DT_BF16, 768, 1536, 1.0f, 1},
        {GG_DT_F16, 1540, 3, 0.0f, 1},  {GG_DT_BF16, 4, 70000, 1.0f, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) check_round_case(&cases[k]);
}

/* What the kernel cannot take is refused before any launch: rows or leading dimension not a multiple of 4, a leading
 * dimension short of the rows, a misaligned sum or second part, an fp32 output. */
static void round_sum_refuses_bad_arguments(void **state) {
    (void)state;
    REQUIRE_GPU();
    float *sum;
    uint16_t *d;
    CUDA_OK(cudaMalloc((void **)&sum, 64 * 64 * sizeof *sum + 16));
    CUDA_OK(cudaMalloc((void **)&d, 64 * 64 * 2));
    assert_int_equal(gg_k_round_sum(sum, NULL, NULL, 0.0f, d, GG_DT_BF16, 62, 64, 64, 132, 0), cudaErrorInvalidValue);
    assert_int_equal(gg_k_round_sum(sum, NULL, NULL, 0.0f, d, GG_DT_BF16, 64, 64, 60, 132, 0), cudaErrorInvalidValue);
    assert_int_equal(gg_k_round_sum(sum, NULL, NULL, 0.0f, d, GG_DT_BF16, 60, 64, 62, 132, 0), cudaErrorInvalidValue);
    assert_int_equal(gg_k_round_sum(sum + 1, NULL, NULL, 0.0f, d, GG_DT_BF16, 64, 64, 64, 132, 0),
                     cudaErrorInvalidValue);
    assert_int_equal(gg_k_round_sum(sum, NULL, NULL, 0.0f, d, GG_DT_F32, 64, 64, 64, 132, 0), cudaErrorInvalidValue);
    assert_int_equal(gg_k_round_sum(sum, sum + 1, NULL, 0.0f, d, GG_DT_BF16, 64, 64, 64, 132, 0),
                     cudaErrorInvalidValue); /* a misaligned second part */
    assert_int_equal(gg_k_round_sum(sum, NULL, NULL, 0.0f, d, GG_DT_BF16, 64, 64, 64, 132, 0), cudaSuccess);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaFree(sum));
    CUDA_OK(cudaFree(d));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_sum_rounds_once),
        cmocka_unit_test(round_sum_refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
