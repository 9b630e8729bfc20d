/* case_runner.c - allocation, data, reference, execution and checking of one case (see case_runner.h). */
#include "case_runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define RUN_TRY(call)                                                                                              \
    do {                                                                                                           \
        int rc_ = (int)(call);                                                                                     \
        if (rc_ != 0) return rc_;                                                                                  \
    } while (0)

static void add(gg_tensor *list, int *n, const char *name, gg_elem elem, int64_t rows, int64_t cols, float scale) {
    gg_tensor *t = &list[(*n)++];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->elem = elem;
    t->rows = rows;
    t->cols = cols;
    t->scale = scale;
    t->param = strncmp(name, "grad_weight", 11) == 0 || strncmp(name, "grad_bias", 9) == 0 ||
               (strcmp(name, "grad_gate") == 0 && rows == 1); /* block 1's scalar gate, not block 4's [M,E] */
}

/* The tensors of each block, in the order of gradgraph.h's args, with the spec's input distributions. */
void gg_case_describe(gg_case_run *r) {
    const gg_case *c = &r->c;
    const int64_t M = c->tokens, a = c->dim0, b = c->dim1;
    gg_tensor *in = r->in, *out = r->out;
    int *ni = &r->n_in, *no = &r->n_out;
    switch (c->block_id) {
    case 1: /* H = a */
        add(in, ni, "grad_output", GG_ELEM_BF16, M, a, 1.0f);
        add(in, ni, "gate", GG_ELEM_BF16, 1, 1, 1.0f);
        add(in, ni, "hidden_states", GG_ELEM_BF16, M, a, 1.0f);
        add(in, ni, "mask", GG_ELEM_BF16, M, 1, 1.0f);
        add(out, no, "grad_residual", GG_ELEM_BF16, M, a, 0);
        add(out, no, "grad_hidden_states", GG_ELEM_BF16, M, a, 0);
        add(out, no, "grad_gate", GG_ELEM_BF16, 1, 1, 0);
        break;
    case 2: /* D = a, F = b; linear1_out, tanh_inner, gelu_out come from the forward (scale 0: not drawn) */
        add(in, ni, "grad_output", GG_ELEM_F32, M, a, 1.0f);
        add(in, ni, "hidden_states", GG_ELEM_F32, M, a, 1.0f);
        add(in, ni, "weight1", GG_ELEM_F32, b, a, 0.02f);
        add(in, ni, "weight2", GG_ELEM_F32, a, b, 0.02f);
        add(in, ni, "linear1_out", GG_ELEM_F32, M, b, 0);
        add(in, ni, "tanh_inner", GG_ELEM_F32, M, b, 0);
        add(in, ni, "gelu_out", GG_ELEM_F32, M, b, 0);
        add(out, no, "grad_hidden_states", GG_ELEM_F32, M, a, 0);
        add(out, no, "grad_weight1", GG_ELEM_F32, b, a, 0);
        add(out, no, "grad_weight2", GG_ELEM_F32, a, b, 0);
        break;
    case 3: /* D = a, F = b; intermediate_activated is independent of intermediate in the test data */
        add(in, ni, "grad_output", GG_ELEM_F32, M, a, 1.0f);
        add(in, ni, "hidden_states", GG_ELEM_F32, M, a, 1.0f);
        add(in, ni, "weight1", GG_ELEM_F32, b, a, (float)(1.0 / sqrt((double)a)));
        add(in, ni, "weight2", GG_ELEM_F32, a, b, (float)(1.0 / sqrt((double)b)));
        add(in, ni, "intermediate", GG_ELEM_F32, M, b, 1.0f);
        add(in, ni, "intermediate_activated", GG_ELEM_F32, M, b, 1.0f);
        add(out, no, "grad_hidden_states", GG_ELEM_F32, M, a, 0);
        add(out, no, "grad_weight1", GG_ELEM_F32, b, a, 0);
        add(out, no, "grad_bias1", GG_ELEM_F32, 1, b, 0);
        add(out, no, "grad_weight2", GG_ELEM_F32, a, b, 0);
        add(out, no, "grad_bias2", GG_ELEM_F32, 1, a, 0);
        break;
    case 4: /* H = a, E = b */
        add(in, ni, "grad_output", GG_ELEM_BF16, M, a, 1.0f);
        add(in, ni, "ssm_output", GG_ELEM_BF16, M, b, 1.0f);
        add(in, ni, "gate", GG_ELEM_BF16, M, b, 1.0f);
        add(in, ni, "weight", GG_ELEM_BF16, a, b, (float)(1.0 / sqrt((double)b)));
        add(in, ni, "gate_activated", GG_ELEM_BF16, M, b, 1.0f);
        add(in, ni, "gated_output", GG_ELEM_BF16, M, b, 1.0f);
        add(out, no, "grad_ssm_output", GG_ELEM_BF16, M, b, 0);
        add(out, no, "grad_gate", GG_ELEM_BF16, M, b, 0);
        add(out, no, "grad_weight", GG_ELEM_BF16, a, b, 0);
        add(out, no, "grad_bias", GG_ELEM_BF16, 1, a, 0);
        break;
    }
}

static size_t work_doubles(const gg_case *c) {
    const int64_t M = c->tokens, a = c->dim0, b = c->dim1;
    switch (c->block_id) {
    case 1: return gg_h_ref_tanh_gate_work_doubles(M, a);
    case 2: return gg_h_ref_gelu_ffn_work_doubles(M, a, b);
    case 3: return gg_h_ref_mlp_work_doubles(M, a, b);
    case 4: return gg_h_ref_ssm_gate_work_doubles(M, a, b);
    }
    return 0;
}

static int dev_alloc(gg_case_run *r, void **p, size_t bytes) {
    bytes = bytes ? bytes : 16;
    int rc = (int)cudaMalloc(p, bytes);
    if (rc == 0) r->device_bytes += bytes;
    return rc;
}

/* An output of `bytes` with `guard` bytes on each side: t->dev inside t->alloc. */
static int out_alloc(gg_case_run *r, gg_tensor *t, size_t bytes, size_t guard) {
    const int rc = dev_alloc(r, &t->alloc, bytes + 2 * guard);
    if (rc == 0) {
        t->guard = guard;
        t->dev = (char *)t->alloc + guard;
    }
    return rc;
}

int gg_case_run_create(const gg_case *c, gg_stream stream, gg_case_run **out, char *err, size_t err_bytes) {
    return gg_case_run_create_guarded(c, stream, 0, out, err, err_bytes);
}

int gg_case_run_create_guarded(const gg_case *c, gg_stream stream, size_t guard_bytes, gg_case_run **out, char *err,
                               size_t err_bytes) {
    *out = NULL;
    if (guard_bytes % 256 != 0) {
        snprintf(err, err_bytes, "guard_bytes = %zu is not a multiple of 256", guard_bytes);
        return (int)cudaErrorInvalidValue;
    }
    gg_case_run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, err_bytes, "out of host memory");
        return (int)cudaErrorMemoryAllocation;
    }
    r->c = *c;
    r->stream = stream;
    gg_case_describe(r);
    int rc = 0;
    for (int i = 0; i < r->n_in && rc == 0; ++i) rc = dev_alloc(r, &r->in[i].dev, gg_case_tensor_bytes(&r->in[i]));
    for (int i = 0; i < r->n_out && rc == 0; ++i) {
        rc = out_alloc(r, &r->out[i], gg_case_tensor_bytes(&r->out[i]), guard_bytes);
        if (rc == 0) rc = dev_alloc(r, (void **)&r->out[i].ref, gg_case_tensor_elems(&r->out[i]) * sizeof(double));
    }
    if (rc == 0) rc = dev_alloc(r, (void **)&r->work, work_doubles(c) * sizeof(double));
    if (rc == 0) rc = dev_alloc(r, &r->compare_scratch, gg_h_compare_scratch_bytes());
    if (rc == 0) {
        cublasHandle_t h = NULL;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) rc = (int)cudaErrorUnknown;
        r->cublas = h;
    }
    if (rc != 0) {
        snprintf(err, err_bytes, "%s case %d (M=%lld): allocation failed: %s", c->block, c->index,
                 (long long)c->tokens, cudaGetErrorString((cudaError_t)rc));
        gg_case_run_destroy(r);
        return rc;
    }
    *out = r;
    return 0;
}

int gg_case_run_dist_grads(gg_case_run *r, gg_ctx *ctx) {
    for (int i = 0; i < r->n_out; ++i) {
        if (!r->out[i].param) continue;
        void *p = NULL;
        const gg_status st = gg_dist_alloc(ctx, gg_case_tensor_bytes(&r->out[i]), &p);
        if (st != GG_SUCCESS) return (int)st; /* the ones moved so far are freed with the run */
        cudaFree(r->out[i].alloc);
        r->out[i].alloc = NULL;
        r->out[i].guard = 0;
        r->out[i].dev = p;
        r->out[i].dist = 1;
        r->grads_ctx = ctx;
    }
    return 0;
}

void gg_case_run_destroy(gg_case_run *r) {
    if (!r) return;
    for (int i = 0; i < r->n_in; ++i) cudaFree(r->in[i].dev);
    for (int i = 0; i < r->n_out; ++i) {
        if (r->out[i].dist) (void)gg_dist_free(r->grads_ctx, r->out[i].dev);
        else cudaFree(r->out[i].alloc);
        cudaFree(r->out[i].ref);
    }
    cudaFree(r->work);
    cudaFree(r->compare_scratch);
    if (r->cublas) cublasDestroy((cublasHandle_t)r->cublas);
    free(r);
}

int gg_case_poison(gg_case_run *r) {
    for (int i = 0; i < r->n_out; ++i) {
        gg_tensor *t = &r->out[i];
        if (t->elem == GG_ELEM_F32)
            RUN_TRY(gg_h_poison_f32(t->dev, gg_case_tensor_elems(t), r->stream));
        else
            RUN_TRY(gg_h_poison_bf16(t->dev, gg_case_tensor_elems(t), r->stream));
    }
    return 0;
}

int gg_case_guards_fill(gg_case_run *r) {
    for (int i = 0; i < r->n_out; ++i) {
        const gg_tensor *t = &r->out[i];
        if (!t->guard) continue;
        RUN_TRY(cudaMemset(t->alloc, GG_CASE_GUARD_BYTE, t->guard));
        RUN_TRY(cudaMemset((char *)t->dev + gg_case_tensor_bytes(t), GG_CASE_GUARD_BYTE, t->guard));
    }
    return (int)cudaDeviceSynchronize();
}

int gg_case_guards_check(gg_case_run *r, size_t *changed, const char **tensor) {
    *changed = 0;
    *tensor = NULL;
    RUN_TRY(cudaStreamSynchronize((cudaStream_t)r->stream));
    for (int i = 0; i < r->n_out; ++i) {
        const gg_tensor *t = &r->out[i];
        if (!t->guard) continue;
        unsigned char *h = malloc(2 * t->guard);
        if (!h) return (int)cudaErrorMemoryAllocation;
        int rc = (int)cudaMemcpy(h, t->alloc, t->guard, cudaMemcpyDeviceToHost);
        if (rc == 0)
            rc = (int)cudaMemcpy(h + t->guard, (char *)t->dev + gg_case_tensor_bytes(t), t->guard,
                                 cudaMemcpyDeviceToHost);
        size_t bad = 0;
        for (size_t j = 0; rc == 0 && j < 2 * t->guard; ++j) bad += h[j] != GG_CASE_GUARD_BYTE;
        free(h);
        RUN_TRY(rc);
        if (bad && !*tensor) *tensor = t->name;
        *changed += bad;
    }
    return 0;
}

#define IN(i) (r->in[i].dev)
#define OUT(i) (r->out[i].dev)
#define REF(i) (r->out[i].ref)

static int reference(gg_case_run *r) {
    const gg_case *c = &r->c;
    const int64_t M = c->tokens, a = c->dim0, b = c->dim1;
    switch (c->block_id) {
    case 1:
        return gg_h_ref_tanh_gate(r->cublas, M, a, IN(0), IN(1), IN(2), IN(3), REF(0), REF(1), REF(2), r->work,
                                  r->stream);
    case 2:
        return gg_h_ref_gelu_ffn(r->cublas, M, a, b, IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), REF(0), REF(1),
                                 REF(2), r->work, r->stream);
    case 3:
        return gg_h_ref_mlp(r->cublas, M, a, b, IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), REF(0), REF(1), REF(2),
                            REF(3), REF(4), r->work, r->stream);
    case 4:
        return gg_h_ref_ssm_gate(r->cublas, M, a, b, c->use_silu_gate, IN(0), IN(1), IN(2), IN(3), IN(4), IN(5),
                                 REF(0), REF(1), REF(2), REF(3), r->work, r->stream);
    }
    return (int)cudaErrorInvalidValue;
}

int gg_case_prepare(gg_case_run *r, uint64_t seed) {
    for (int i = 0; i < r->n_in; ++i) {
        gg_tensor *t = &r->in[i];
        if (t->scale == 0.0f) continue; /* made by the forward below */
        const uint64_t s = seed * 1000003ull + (uint64_t)i * 7919ull + 1;
        if (t->elem == GG_ELEM_F32)
            RUN_TRY(gg_h_fill_normal_f32(t->dev, gg_case_tensor_elems(t), t->scale, s, r->stream));
        else
            RUN_TRY(gg_h_fill_normal_bf16(t->dev, gg_case_tensor_elems(t), t->scale, s, r->stream));
    }
    if (r->c.block_id == 2)
        RUN_TRY(gg_h_gelu_ffn_forward(r->c.tokens, r->c.dim0, r->c.dim1, IN(1), IN(2), IN(4), IN(5), IN(6),
                                      r->stream));
    RUN_TRY(reference(r));
    return gg_case_poison(r);
}

/* How the case's call is made: eagerly, by creating a graph, or through one (host- or device-selected). */
typedef enum how { EAGER, GRAPH_CREATE, GRAPH_RUN, GRAPH_RUN_DEVICE } how;

typedef struct target {
    how how;
    gg_ctx *ctx;
    gg_graph *graph;
    gg_graph **graph_out;
    const gg_graph_config *config;
    const int64_t *device_tokens;
} target;

/* Each block's desc and args from the case, then the call `t` asks for. */
#define DISPATCH(block, d, x)                                                                                      \
    switch (t->how) {                                                                                              \
    case EAGER: return gg_##block##_backward(t->ctx, &d, &x, r->stream);                                           \
    case GRAPH_CREATE: return gg_##block##_graph_create(t->ctx, &d, t->config, t->graph_out);                      \
    case GRAPH_RUN: return gg_##block##_graph_run(t->graph, &d, &x, r->stream);                                    \
    case GRAPH_RUN_DEVICE: return gg_##block##_graph_run_device(t->graph, &d, t->device_tokens, &x, r->stream);    \
    }                                                                                                              \
    return GG_ERROR_INTERNAL

static gg_status call_block(gg_case_run *r, gg_precision precision, const target *t) {
    const gg_case *c = &r->c;
    const int64_t M = c->tokens, a = c->dim0, b = c->dim1;
    switch (c->block_id) {
    case 1: {
        const gg_tanh_gate_desc d = {.tokens = M, .hidden = a, .accumulate = r->accumulate};
        const gg_tanh_gate_args x = {IN(0), IN(1), IN(2), IN(3), OUT(0), OUT(1), OUT(2)};
        DISPATCH(tanh_gate, d, x);
    }
    case 2: {
        const gg_gelu_ffn_desc d = {.tokens = M, .hidden = a, .ffn = b, .precision = precision,
                                    .accumulate = r->accumulate};
        const gg_gelu_ffn_args x = {IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), OUT(0), OUT(1), OUT(2), NULL,
                                    NULL, NULL, NULL, NULL, NULL};
        DISPATCH(gelu_ffn, d, x);
    }
    case 3: {
        const gg_mlp_desc d = {.tokens = M, .hidden = a, .ffn = b, .precision = precision,
                               .accumulate = r->accumulate};
        const gg_mlp_args x = {IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), OUT(0), OUT(1), OUT(2), OUT(3), OUT(4), NULL,
                               NULL, NULL, NULL, NULL, NULL};
        DISPATCH(mlp, d, x);
    }
    case 4: {
        const gg_ssm_gate_desc d = {.tokens = M, .hidden = a, .expanded = b, .use_silu_gate = c->use_silu_gate,
                                    .accumulate = r->accumulate};
        const gg_ssm_gate_args x = {IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), OUT(0), OUT(1), OUT(2), OUT(3)};
        DISPATCH(ssm_gate, d, x);
    }
    }
    return GG_ERROR_INVALID_ARGUMENT;
}

gg_status gg_case_execute(gg_case_run *r, gg_ctx *ctx, gg_precision precision) {
    const target t = {.how = EAGER, .ctx = ctx};
    return call_block(r, precision, &t);
}

gg_status gg_case_graph_create(gg_case_run *r, gg_ctx *ctx, gg_precision precision, const gg_graph_config *config,
                               gg_graph **graph) {
    const target t = {.how = GRAPH_CREATE, .ctx = ctx, .graph_out = graph, .config = config};
    return call_block(r, precision, &t);
}

gg_status gg_case_graph_run(gg_case_run *r, gg_graph *graph, gg_precision precision) {
    const target t = {.how = GRAPH_RUN, .graph = graph};
    return call_block(r, precision, &t);
}

gg_status gg_case_graph_run_device(gg_case_run *r, gg_graph *graph, gg_precision precision,
                                   const int64_t *device_tokens) {
    const target t = {.how = GRAPH_RUN_DEVICE, .graph = graph, .device_tokens = device_tokens};
    return call_block(r, precision, &t);
}

void *gg_case_outputs_to_host(gg_case_run *r, size_t *bytes) {
    /* cudaMemcpy does not wait for a non-blocking stream: wait for the run's work first */
    if (cudaStreamSynchronize((cudaStream_t)r->stream) != cudaSuccess) return NULL;
    size_t total = 0;
    for (int i = 0; i < r->n_out; ++i) total += gg_case_tensor_bytes(&r->out[i]);
    char *h = malloc(total ? total : 1);
    size_t at = 0;
    for (int i = 0; h && i < r->n_out; ++i) {
        const size_t n = gg_case_tensor_bytes(&r->out[i]);
        if (cudaMemcpy(h + at, r->out[i].dev, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
            free(h);
            return NULL;
        }
        at += n;
    }
    *bytes = total;
    return h;
}

int gg_case_params_to_device(gg_case_run *r, const void *outputs) {
    size_t at = 0;
    for (int i = 0; i < r->n_out; ++i) {
        const size_t n = gg_case_tensor_bytes(&r->out[i]);
        if (r->out[i].param) {
            const cudaError_t e = cudaMemcpy(r->out[i].dev, (const char *)outputs + at, n, cudaMemcpyHostToDevice);
            if (e != cudaSuccess) return e;
        }
        at += n;
    }
    return cudaSuccess;
}

int gg_case_check(gg_case_run *r, gg_case_verdict *v) {
    memset(v, 0, sizeof *v);
    v->passed = 1;
    v->worst_matched_ratio = 1.0;
    for (int i = 0; i < r->n_out; ++i) {
        gg_tensor *t = &r->out[i];
        gg_h_compare_result *res = &v->result[i];
        const size_t n = gg_case_tensor_elems(t);
        if (t->elem == GG_ELEM_F32)
            RUN_TRY(gg_h_compare_f32(t->dev, t->ref, n, r->c.atol, r->c.rtol, r->compare_scratch, r->stream, res));
        else
            RUN_TRY(gg_h_compare_bf16(t->dev, t->ref, n, r->c.atol, r->c.rtol, r->compare_scratch, r->stream, res));
        const double ratio = res->n ? (double)res->matched / (double)res->n : 0.0;
        if (ratio < v->worst_matched_ratio) v->worst_matched_ratio = ratio;
        if (res->worst_ratio > v->worst_ratio) v->worst_ratio = res->worst_ratio;
        if (ratio < 0.99 || res->nonfinite != 0) v->passed = 0;
    }
    return 0;
}
