/* step_model.c - the layer stacks of step_model.h. */
#include "step_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#define MAX_BUFFERS 1024

typedef struct sm_layer {
    sm_model *model;
    const float *dy; /* MLP: the residual stream's gradient from above, added to dX by the callback */
    gg_mlp_args mlp;
    gg_tanh_gate_args tanh;
    gg_ssm_gate_args ssm;
    gg_graph *graph[2];
    const float *act[2][3]; /* MLP: hidden_states, intermediate, intermediate_activated of each activation set */
    const void *act16[2][3]; /* with fp16_copies: the fp16 copies of each set's hidden_states, intermediate_activated,
                                intermediate */
    const void *w16[2];      /* ... and of weight1, weight2 */
    int set;                 /* the activation set the MLP points at */
} sm_layer;

struct sm_model {
    gg_ctx *ctx;
    sm_config config;
    sm_layer *layers;
    cublasHandle_t blas;
    void *buffers[MAX_BUFFERS];
    int n_buffers;
    /* the gradients: pointer, rows (0: a parameter gradient of `cols` elements), cols */
    struct {
        void *ptr;
        int64_t rows, cols;
    } grads[MAX_BUFFERS];
    int n_grads;
    int elem;        /* bytes of an element: 4 or 2 */
    int copy_failed; /* an fp16_copy failed: every later buffer() is NULL too, so that sm_create's check fails */
    uint32_t random;  /* the inputs' generator, from config.seed: two models of one config hold the same inputs */
    /* the loss's gradient (the first call's grad_output) and a copy that sm_clear restores it from: a padded step
     * run zeroes its padding rows in place */
    void *loss_grad, *loss_grad_saved;
};

static uint32_t next_random(uint32_t *s) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* A device buffer of rows x cols elements: an input filled with uniform values in [-scale, scale] (grad 0), or a
 * gradient left as is (grad 1: a parameter's, 2: an activation's of max_tokens rows); NULL on failure. */
static void *buffer(sm_model *m, int64_t rows, int64_t cols, float scale, int grad) {
    if (m->copy_failed) return NULL;
    const size_t n = (size_t)(rows * cols), bytes = n * (size_t)m->elem;
    void *d = NULL;
    if (m->n_buffers == MAX_BUFFERS || cudaMalloc(&d, bytes) != cudaSuccess) return NULL;
    m->buffers[m->n_buffers++] = d;
    if (grad) {
        m->grads[m->n_grads].ptr = d;
        m->grads[m->n_grads].rows = grad == 2 ? rows : 0;
        m->grads[m->n_grads++].cols = grad == 2 ? cols : rows * cols;
        return d;
    }
    char *h = malloc(bytes);
    if (!h) return NULL;
    for (size_t i = 0; i < n; ++i) {
        const float v = scale * ((float)(next_random(&m->random) >> 8) / 8388608.0f - 1.0f);
        if (m->elem == 4) memcpy(h + 4 * i, &v, 4);
        else {
            const uint16_t b = to_bf16(v);
            memcpy(h + 2 * i, &b, 2);
        }
    }
    const cudaError_t err = cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    free(h);
    return err == cudaSuccess ? d : NULL;
}

/* With fp16_copies, the fp16 copy of the fp32 buffer src of rows x cols elements (gg_to_fp16), else NULL. */
static const void *fp16_copy(sm_model *m, const float *src, int64_t rows, int64_t cols) {
    if (!m->config.fp16_copies || !src) return NULL;
    void *d = NULL;
    const size_t n = (size_t)(rows * cols);
    if (m->n_buffers == MAX_BUFFERS || cudaMalloc(&d, n * 2) != cudaSuccess) return m->copy_failed = 1, NULL;
    m->buffers[m->n_buffers++] = d;
    if (gg_to_fp16(m->ctx, src, d, n, NULL) != GG_SUCCESS || cudaDeviceSynchronize() != cudaSuccess)
        return m->copy_failed = 1, NULL;
    return d;
}

/* Points layer y's MLP at activation set `set`, with its fp16 copies (when the model has them) or not. */
static void point_at(sm_layer *y, int set, int copies) {
    y->set = set;
    y->mlp.hidden_states = y->act[set][0];
    y->mlp.intermediate = y->act[set][1];
    y->mlp.intermediate_activated = y->act[set][2];
    y->mlp.hidden_states_fp16 = copies ? y->act16[set][0] : NULL;
    y->mlp.intermediate_activated_fp16 = copies ? y->act16[set][1] : NULL;
    y->mlp.intermediate_fp16 = copies ? y->act16[set][2] : NULL;
    y->mlp.weight1_fp16 = copies ? y->w16[0] : NULL;
    y->mlp.weight2_fp16 = copies ? y->w16[1] : NULL;
}

void sm_use_copies(sm_model *m, int use) {
    for (int l = 0; !m->config.gated && l < m->config.layers; ++l) point_at(&m->layers[l], m->layers[l].set, use);
}

void sm_destroy(sm_model *m) {
    if (!m) return;
    for (int l = 0; m->layers && l < m->config.layers; ++l)
        for (int i = 0; i < 2; ++i) gg_graph_destroy(m->layers[l].graph[i]);
    for (int i = 0; i < m->n_buffers; ++i) cudaFree(m->buffers[i]);
    if (m->blas) cublasDestroy(m->blas);
    free(m->layers);
    free(m);
}

int sm_create(gg_ctx *ctx, const sm_config *c, sm_model **out) {
    sm_model *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return -1;
    m->ctx = ctx;
    m->config = *c;
    m->random = 2463534242u + c->seed;
    if (!m->random) m->random = 2463534242u; /* xorshift's one fixed point */
    m->elem = c->gated ? 2 : 4;
    if (c->fp16_copies && (c->gated || c->precision != GG_PRECISION_FP16)) {
        fprintf(stderr, "sm_create: fp16_copies needs residual MLPs in fp16 mode\n");
        free(m);
        return -1;
    }
    m->layers = calloc((size_t)c->layers, sizeof *m->layers);
    if (!m->layers || cublasCreate(&m->blas) != CUBLAS_STATUS_SUCCESS) goto fail;
    const int64_t M = c->max_tokens, D = c->hidden, F = c->ffn;
    const void *above = m->loss_grad = buffer(m, M, D, 1.0f, 0); /* the loss's gradient */
    if (!above) goto fail;
    const size_t loss_bytes = (size_t)(M * D) * (size_t)m->elem;
    if (m->n_buffers == MAX_BUFFERS || cudaMalloc(&m->loss_grad_saved, loss_bytes) != cudaSuccess) goto fail;
    m->buffers[m->n_buffers++] = m->loss_grad_saved;
    if (cudaMemcpy(m->loss_grad_saved, m->loss_grad, loss_bytes, cudaMemcpyDeviceToDevice) != cudaSuccess)
        goto fail;
    for (int l = c->layers - 1; l >= 0; --l) {
        sm_layer *y = &m->layers[l];
        y->model = m;
        y->dy = above;
        if (!c->gated) {
            gg_mlp_args a = {above,
                             buffer(m, M, D, 1.0f, 0),
                             buffer(m, F, D, 1.0f / sqrtf((float)D), 0),
                             buffer(m, D, F, 1.0f / sqrtf((float)F), 0),
                             buffer(m, M, F, 1.0f, 0),
                             buffer(m, M, F, 1.0f, 0),
                             buffer(m, M, D, 0, 2),
                             buffer(m, F, D, 0, 1),
                             buffer(m, 1, F, 0, 1),
                             buffer(m, D, F, 0, 1),
                             buffer(m, 1, D, 0, 1),
                             c->fused_residual ? above : NULL,
                             NULL, NULL, NULL, NULL, NULL};
            y->mlp = a;
            y->w16[0] = fp16_copy(m, a.weight1, F, D);
            y->w16[1] = fp16_copy(m, a.weight2, D, F);
            y->act[0][0] = a.hidden_states, y->act[0][1] = a.intermediate, y->act[0][2] = a.intermediate_activated;
            y->act16[0][0] = fp16_copy(m, a.hidden_states, M, D);
            y->act16[0][1] = fp16_copy(m, a.intermediate_activated, M, F);
            y->act16[0][2] = fp16_copy(m, a.intermediate, M, F);
            point_at(y, 0, 1);
            above = a.grad_hidden_states;
        } else {
            gg_tanh_gate_args t = {above, buffer(m, 1, 8, 1.0f, 0), buffer(m, M, D, 1.0f, 0), buffer(m, M, 1, 1.0f, 0),
                                   buffer(m, M, D, 0, 2), buffer(m, M, D, 0, 2), buffer(m, 1, 8, 0, 1)};
            gg_ssm_gate_args s = {t.grad_hidden_states,       buffer(m, M, F, 1.0f, 0), buffer(m, M, F, 1.0f, 0),
                                  buffer(m, D, F, 1.0f / sqrtf((float)F), 0), buffer(m, M, F, 1.0f, 0),
                                  buffer(m, M, F, 1.0f, 0),   buffer(m, M, F, 0, 2),    buffer(m, M, F, 0, 2),
                                  buffer(m, D, F, 0, 1),      buffer(m, 1, D, 0, 1)};
            y->tanh = t;
            y->ssm = s;
            above = t.grad_residual;
        }
        if (!above) goto fail;
    }
    for (int l = 0; l < c->layers; ++l) {
        const sm_layer *y = &m->layers[l];
        const void *const *p = c->gated ? (const void *const *)&y->ssm : (const void *const *)&y->mlp;
        /* every buffer made (grad_residual is NULL unless fused_residual; the fp16 copies are checked below) */
        const size_t n = c->gated            ? sizeof y->ssm / sizeof(void *)
                         : c->fused_residual ? offsetof(gg_mlp_args, hidden_states_fp16) / sizeof(void *)
                                             : offsetof(gg_mlp_args, grad_residual) / sizeof(void *);
        for (size_t i = 0; i < n; ++i)
            if (!p[i]) goto fail;
        if (c->fp16_copies && (!y->w16[0] || !y->w16[1] || !y->act16[0][0] || !y->act16[0][1] || !y->act16[0][2]))
            goto fail;
        if (c->gated && (!y->tanh.gate || !y->tanh.mask || !y->tanh.grad_gate || !y->tanh.grad_hidden_states))
            goto fail;
    }
    *out = m;
    return 0;
fail:
    fprintf(stderr, "sm_create: out of device memory\n");
    sm_destroy(m);
    return -1;
}

/* The residual add of an MLP layer: dX += dY over `tokens` rows (in place: dX is the next layer's grad_output). */
static void residual_add(void *user, gg_stream stream, int64_t tokens) {
    sm_layer *y = user;
    const float one = 1.0f;
    cublasSetStream(y->model->blas, (cudaStream_t)stream);
    cublasSaxpy(y->model->blas, (int)(tokens * y->model->config.hidden), &one, y->dy, 1, y->mlp.grad_hidden_states,
                1);
}

static gg_mlp_desc mlp_desc(const sm_model *m, int64_t tokens, int accumulate) {
    return (gg_mlp_desc){tokens, m->config.hidden, m->config.ffn, m->config.precision, accumulate};
}
static gg_tanh_gate_desc tanh_desc(const sm_model *m, int64_t tokens, int accumulate) {
    return (gg_tanh_gate_desc){tokens, m->config.hidden, accumulate};
}
static gg_ssm_gate_desc ssm_desc(const sm_model *m, int64_t tokens, int accumulate) {
    return (gg_ssm_gate_desc){tokens, m->config.hidden, m->config.ffn, 1, accumulate};
}

gg_status sm_use_activations(sm_model *m, int set, gg_step *step) {
    if (m->config.gated || set < 0 || set > 1) return GG_ERROR_UNSUPPORTED;
    const int64_t M = m->config.max_tokens, D = m->config.hidden, F = m->config.ffn;
    for (int l = m->config.layers - 1; l >= 0; --l) {
        sm_layer *y = &m->layers[l];
        if (!y->act[1][0]) { /* the first switch to set 1: new random values */
            y->act[1][0] = buffer(m, M, D, 1.0f, 0);
            y->act[1][1] = buffer(m, M, F, 1.0f, 0);
            y->act[1][2] = buffer(m, M, F, 1.0f, 0);
            y->act16[1][0] = fp16_copy(m, y->act[1][0], M, D);
            y->act16[1][1] = fp16_copy(m, y->act[1][2], M, F);
            y->act16[1][2] = fp16_copy(m, y->act[1][1], M, F);
            if (!y->act[1][0] || !y->act[1][1] || !y->act[1][2] || m->copy_failed) return GG_ERROR_OUT_OF_MEMORY;
        }
        point_at(y, set, 1);
        /* the step's calls, last layer first: the MLP, then its callback */
        const int call = (m->config.fused_residual ? 1 : 2) * (m->config.layers - 1 - l);
        const gg_status st = step ? gg_step_set_args(step, call, &y->mlp) : GG_SUCCESS;
        if (st != GG_SUCCESS) return st;
    }
    return GG_SUCCESS;
}

gg_status sm_add_to_step(sm_model *m, gg_step *step) {
    for (int l = m->config.layers - 1; l >= 0; --l) {
        sm_layer *y = &m->layers[l];
        gg_status st;
        if (m->config.gated) {
            const gg_tanh_gate_desc t = tanh_desc(m, 1, 0);
            const gg_ssm_gate_desc s = ssm_desc(m, 1, 0);
            st = gg_step_add_tanh_gate(step, &t, &y->tanh);
            if (st == GG_SUCCESS) st = gg_step_add_ssm_gate(step, &s, &y->ssm);
        } else {
            const gg_mlp_desc d = mlp_desc(m, 1, 0);
            st = gg_step_add_mlp(step, &d, &y->mlp);
            if (st == GG_SUCCESS && !m->config.fused_residual) st = gg_step_add_callback(step, residual_add, y);
        }
        if (st != GG_SUCCESS) return st;
    }
    return GG_SUCCESS;
}

/* One layer as eager calls (graph NULL) or per-block graphs. */
static gg_status run_layer(sm_model *m, sm_layer *y, const gg_graph_config *gc, int64_t tokens, int accumulate,
                           cudaStream_t stream) {
    gg_status st = GG_SUCCESS;
    if (m->config.gated) {
        const gg_tanh_gate_desc t = tanh_desc(m, tokens, accumulate);
        const gg_ssm_gate_desc s = ssm_desc(m, tokens, accumulate);
        if (!gc) {
            st = gg_tanh_gate_backward(m->ctx, &t, &y->tanh, stream);
            return st == GG_SUCCESS ? gg_ssm_gate_backward(m->ctx, &s, &y->ssm, stream) : st;
        }
        if (!y->graph[0]) st = gg_tanh_gate_graph_create(m->ctx, &t, gc, &y->graph[0]);
        if (st == GG_SUCCESS && !y->graph[1]) st = gg_ssm_gate_graph_create(m->ctx, &s, gc, &y->graph[1]);
        if (st == GG_SUCCESS) st = gg_tanh_gate_graph_run(y->graph[0], &t, &y->tanh, stream);
        return st == GG_SUCCESS ? gg_ssm_gate_graph_run(y->graph[1], &s, &y->ssm, stream) : st;
    }
    const gg_mlp_desc d = mlp_desc(m, tokens, accumulate);
    if (!gc) st = gg_mlp_backward(m->ctx, &d, &y->mlp, stream);
    else {
        if (!y->graph[0]) st = gg_mlp_graph_create(m->ctx, &d, gc, &y->graph[0]);
        if (st == GG_SUCCESS) st = gg_mlp_graph_run(y->graph[0], &d, &y->mlp, stream);
    }
    if (st == GG_SUCCESS && !m->config.fused_residual) residual_add(y, (gg_stream)stream, tokens);
    return st;
}

static gg_status run_layers(sm_model *m, const gg_graph_config *gc, int64_t tokens, int accumulate,
                            cudaStream_t stream) {
    for (int l = m->config.layers - 1; l >= 0; --l) {
        const gg_status st = run_layer(m, &m->layers[l], gc, tokens, accumulate, stream);
        if (st != GG_SUCCESS) return st;
    }
    return GG_SUCCESS;
}

gg_status sm_run_eager(sm_model *m, int64_t tokens, int accumulate, cudaStream_t stream) {
    return run_layers(m, NULL, tokens, accumulate, stream);
}

gg_status sm_run_block_graphs(sm_model *m, const gg_graph_config *config, int64_t tokens, int accumulate,
                              cudaStream_t stream) {
    const gg_graph_config defaults = GG_GRAPH_CONFIG_INIT;
    return run_layers(m, config ? config : &defaults, tokens, accumulate, stream);
}

void *sm_gradients(sm_model *m, int64_t tokens, size_t *bytes, int *elem_bytes) {
    size_t total = 0;
    for (int i = 0; i < m->n_grads; ++i)
        total += (size_t)((m->grads[i].rows ? tokens : 1) * m->grads[i].cols) * (size_t)m->elem;
    char *h = malloc(total ? total : 1);
    size_t at = 0;
    for (int pass = 0; pass < 2; ++pass) /* the parameter gradients first */
        for (int i = 0; h && i < m->n_grads; ++i) {
            if ((m->grads[i].rows != 0) != pass) continue;
            const size_t n = (size_t)((m->grads[i].rows ? tokens : 1) * m->grads[i].cols) * (size_t)m->elem;
            if (cudaMemcpy(h + at, m->grads[i].ptr, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
                free(h);
                return NULL;
            }
            at += n;
        }
    *bytes = total;
    *elem_bytes = m->elem;
    return h;
}

size_t sm_param_bytes(const sm_model *m) {
    size_t total = 0;
    for (int i = 0; i < m->n_grads; ++i)
        if (!m->grads[i].rows) total += (size_t)m->grads[i].cols * (size_t)m->elem;
    return total;
}

int sm_param_grads(const sm_model *m, void **ptrs, size_t *counts, int max) {
    int n = 0;
    for (int i = 0; i < m->n_grads && n < max; ++i)
        if (!m->grads[i].rows) ptrs[n] = m->grads[i].ptr, counts[n++] = (size_t)m->grads[i].cols;
    return n;
}

int sm_params(const sm_model *m, sm_param *out, int max) {
    int n = 0;
    const size_t count = (size_t)(m->config.hidden * m->config.ffn);
    for (int l = 0; !m->config.gated && l < m->config.layers && n + 2 <= max; ++l) {
        const sm_layer *y = &m->layers[l];
        /* made writable by buffer() and fp16_copy() */
        out[n++] = (sm_param){(float *)y->mlp.weight1, y->mlp.grad_weight1, count, (void *)y->w16[0]};
        out[n++] = (sm_param){(float *)y->mlp.weight2, y->mlp.grad_weight2, count, (void *)y->w16[1]};
    }
    return n;
}

void sm_clear(sm_model *m, int byte) {
    for (int i = 0; i < m->n_grads; ++i)
        cudaMemset(m->grads[i].ptr, byte,
                   (size_t)((m->grads[i].rows ? m->grads[i].rows : 1) * m->grads[i].cols) * (size_t)m->elem);
    cudaMemcpy(m->loss_grad, m->loss_grad_saved,
               (size_t)(m->config.max_tokens * m->config.hidden) * (size_t)m->elem, cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
}

static float element(const void *p, size_t i, int elem) {
    if (elem == 4) return ((const float *)p)[i];
    const uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

double sm_max_rel_diff(const void *a, const void *b, size_t bytes, int elem, int *bitwise) {
    *bitwise = memcmp(a, b, bytes) == 0;
    const size_t n = bytes / (size_t)elem;
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; ++i) scale = fmax(scale, fabs(element(b, i, elem)));
    for (size_t i = 0; i < n; ++i) {
        const double d = fabs((double)element(a, i, elem) - element(b, i, elem));
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    return scale > 0 ? worst / scale : worst;
}

double sm_flop(const sm_model *m, int64_t tokens) {
    const double M = (double)tokens, D = (double)m->config.hidden, F = (double)m->config.ffn;
    return m->config.layers * (m->config.gated ? 4 * M * D * F : 8 * M * D * F);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sm_median(const double *v, int n) {
    double s[SM_MAX_ROUNDS];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return s[n / 2];
}
