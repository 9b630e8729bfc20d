/* train_model.c - the character model of train_model.h. */
#include "train_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "train_kernels.h"

#define MAX_LAYERS 64
#define CUBLAS_WORKSPACE ((size_t)32 << 20)

typedef struct tm_layer {
    tm_model *model;
    int index;
    float *w1, *b1, *w2, *b2;     /* parameters [F,D], [F], [D,F], [D] */
    float *gw1, *gb1, *gw2, *gb2; /* their gradients */
    gg_mlp_args args;             /* the backward's */
} tm_layer;

struct tm_model {
    gg_ctx *ctx;
    tm_config c;
    int64_t hidden, vocab, n; /* D, V, text length */
    cublasHandle_t blas;
    void *blas_workspace;
    uint8_t *text;
    /* the parameters and their gradients: one buffer each, the same offsets */
    float *params, *grads;
    int64_t n_params, n_decay; /* the matrices (decayed) come first, the biases after */
    float *emb, *wout, *bout, *gemb, *gwout, *gbout;
    tm_layer layers[MAX_LAYERS];
    int32_t *tokens;          /* [M, C+1] */
    float *x[MAX_LAYERS + 1]; /* the residual stream before each layer, and after the last [M,D] */
    float *pre[MAX_LAYERS], *act[MAX_LAYERS]; /* each layer's saved pre-activation and GELU [M,F] */
    float *out;               /* a layer's MLP output [M,D], before the residual add */
    float *gx[MAX_LAYERS + 1]; /* the loss's gradient with respect to x[l] [M,D] */
    float *logits, *glogits, *row_loss, *losses, *partials;
    int64_t *counter; /* the step number: the batch reads it, the loss advances it, AdamW's t */
    const char *error; /* the first failure inside a callback */
    char error_buf[256];
    gg_optim *opt; /* AdamW */
};

const char *tm_callback_error(const tm_model *m) { return m->error; }

static void fail(tm_model *m, const char *what, const char *detail) {
    if (m->error) return;
    snprintf(m->error_buf, sizeof m->error_buf, "%s: %s", what, detail);
    m->error = m->error_buf;
}

static void cuda_ok(tm_model *m, const char *what, cudaError_t err) {
    if (err != cudaSuccess) fail(m, what, cudaGetErrorString(err));
}

/* ---- row-major GEMMs through cuBLAS (column-major: a row-major [r,c] matrix is its transpose) ---- */

/* y[M,N] = x[M,K] wᵀ (w [N,K]) */
static void gemm_xwt(tm_model *m, const float *x, const float *w, int64_t M, int64_t N, int64_t K, float *y) {
    const float one = 1.0f, zero = 0.0f;
    if (cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w, (int)K, x, (int)K, &zero, y,
                    (int)N) != CUBLAS_STATUS_SUCCESS)
        fail(m, "cublasSgemm (x wT)", "failed");
}

/* y[M,N] = a[M,K] b (b [K,N]) */
static void gemm_ab(tm_model *m, const float *a, const float *b, int64_t M, int64_t N, int64_t K, float *y) {
    const float one = 1.0f, zero = 0.0f;
    if (cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, b, (int)N, a, (int)K, &zero, y,
                    (int)N) != CUBLAS_STATUS_SUCCESS)
        fail(m, "cublasSgemm (a b)", "failed");
}

/* y[N,K] = a[M,N]ᵀ b (b [M,K]) */
static void gemm_atb(tm_model *m, const float *a, const float *b, int64_t M, int64_t N, int64_t K, float *y) {
    const float one = 1.0f, zero = 0.0f;
    if (cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)K, (int)N, (int)M, &one, b, (int)K, a, (int)N, &zero, y,
                    (int)K) != CUBLAS_STATUS_SUCCESS)
        fail(m, "cublasSgemm (aT b)", "failed");
}

static void use_stream(tm_model *m, gg_stream stream) {
    if (cublasSetStream(m->blas, (cudaStream_t)stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(m->blas, m->blas_workspace, CUBLAS_WORKSPACE) != CUBLAS_STATUS_SUCCESS)
        fail(m, "cublasSetStream", "failed");
}

/* ---- the step's pieces: each a gg_step callback, called directly by the eager path ---- */

/* The batch, the embedding, every layer (x[l+1] = x[l] + MLP(x[l])) and the logits. The step's first call: no
 * earlier call's weight-gradient work to wait for, so the forward keeps the whole GPU (gradgraph.h, "Callbacks"). */
static void forward(void *user, gg_stream stream, int64_t rows) {
    tm_model *m = user;
    const cudaStream_t s = (cudaStream_t)stream;
    const int64_t D = m->hidden, F = m->c.ffn;
    use_stream(m, stream);
    cuda_ok(m, "tk_batch", tk_batch(m->text, m->n, m->c.context, rows, m->c.data_seed, m->c.world, m->c.rank,
                                    m->counter, m->tokens, s));
    cuda_ok(m, "tk_embed", tk_embed(m->emb, m->tokens, m->c.context, m->c.embed, rows, m->x[0], s));
    for (int l = 0; l < m->c.layers; ++l) {
        const tm_layer *y = &m->layers[l];
        const gg_mlp_desc desc = {rows, D, F, m->c.precision, 0};
        const gg_mlp_fwd_args a = {.hidden_states = m->x[l], .weight1 = y->w1, .bias1 = y->b1, .weight2 = y->w2,
                                   .bias2 = y->b2, .intermediate = m->pre[l], .intermediate_activated = m->act[l],
                                   .output = m->out};
        const gg_status st = gg_mlp_forward(m->ctx, &desc, &a, stream);
        if (st != GG_SUCCESS) fail(m, "gg_mlp_forward", gg_last_error(m->ctx));
        cuda_ok(m, "tk_add", tk_add(m->x[l], m->out, rows, D, m->x[l + 1], s));
    }
    gemm_xwt(m, m->x[m->c.layers], m->wout, rows, m->vocab, D, m->logits);
}

/* The loss (recorded at the step's index, which it then advances), its gradient, the output layer's gradients and
 * the gradient with respect to the last layer's output. The mean is over this GPU's rows; the all-reduce averages
 * the GPUs' gradients. */
static void loss(void *user, gg_stream stream, int64_t rows) {
    tm_model *m = user;
    const cudaStream_t s = (cudaStream_t)stream;
    const int L = m->c.layers;
    const float scale = 1.0f / (float)rows;
    use_stream(m, stream);
    cuda_ok(m, "tk_cross_entropy", tk_cross_entropy(m->logits, m->bout, m->tokens, m->c.context, (int)m->vocab, rows,
                                                    scale, m->row_loss, m->glogits, s));
    cuda_ok(m, "tk_loss_finish", tk_loss_finish(m->row_loss, rows, scale, m->losses, m->c.steps, m->counter, s));
    gemm_atb(m, m->glogits, m->x[L], rows, m->vocab, m->hidden, m->gwout);
    cuda_ok(m, "tk_col_sum", tk_col_sum(m->glogits, rows, m->vocab, m->gbout, s));
    gemm_ab(m, m->glogits, m->wout, rows, m->hidden, m->vocab, m->gx[L]);
}

static void embedding_backward(void *user, gg_stream stream, int64_t rows) {
    tm_model *m = user;
    cuda_ok(m, "tk_embed_backward", tk_embed_backward(m->gx[0], m->tokens, m->c.context, m->c.embed, (int)m->vocab,
                                                      rows, m->partials, m->gemb, (cudaStream_t)stream));
}

static gg_mlp_desc layer_desc(const tm_model *m) {
    return (gg_mlp_desc){m->c.batch, m->hidden, m->c.ffn, m->c.precision, 0};
}

/* The step's work without the update as eager calls on stream: what the step graph runs, in the same order. */
static gg_status eager_step(tm_model *m, gg_stream stream) {
    const gg_mlp_desc desc = layer_desc(m);
    gg_status st = GG_SUCCESS;
    forward(m, stream, m->c.batch);
    loss(m, stream, m->c.batch);
    for (int l = m->c.layers - 1; l >= 0 && st == GG_SUCCESS; --l) {
        st = gg_mlp_backward(m->ctx, &desc, &m->layers[l].args, stream);
    }
    embedding_backward(m, stream, m->c.batch);
    return st;
}

/* The step once without the update, then the step counter reset and the losses NaN (a step not run): every plan
 * (gradgraph's and cuBLAS's) exists and every kernel is loaded before a capture; the parameters are untouched. */
static int warm_up(tm_model *m) {
    const gg_status st = eager_step(m, NULL);
    const int64_t zero = 0;
    if (st == GG_SUCCESS && !m->error && cudaDeviceSynchronize() == cudaSuccess &&
        cudaMemcpy(m->counter, &zero, sizeof zero, cudaMemcpyHostToDevice) == cudaSuccess &&
        cudaMemset(m->losses, 0xff, (size_t)m->c.steps * sizeof(float)) == cudaSuccess)
        return 0;
    fprintf(stderr, "tm_create: the warm-up step: %s\n",
            st != GG_SUCCESS ? gg_last_error(m->ctx) : m->error ? m->error : "CUDA error");
    return -1;
}

/* ---- the update ---- */

/* AdamW over every tensor of the parameter buffer, weight decay on those before n_decay (the matrices). */
static gg_status make_optimizer(tm_model *m, const int64_t *offsets, const int64_t *counts, int n_tensors) {
    gg_optim_config oc = GG_OPTIM_CONFIG_INIT;
    oc.kind = GG_OPTIM_ADAMW;
    oc.lr = m->c.lr;
    oc.beta1 = m->c.beta1;
    oc.beta2 = m->c.beta2;
    oc.eps = m->c.eps;
    oc.weight_decay = m->c.weight_decay;
    oc.check_finite = 0; /* no loss scaling here, and torch's AdamW (the twin) checks nothing either */
    gg_status st = gg_optim_create(m->ctx, &oc, &m->opt);
    for (int i = 0; st == GG_SUCCESS && i < n_tensors; ++i) {
        const gg_optim_param p = {.param = m->params + offsets[i], .grad = m->grads + offsets[i],
                                  .grad_dtype = GG_OPTIM_FP32, .count = counts[i],
                                  .no_weight_decay = offsets[i] >= m->n_decay};
        st = gg_optim_add_param(m->opt, &p);
    }
    return st == GG_SUCCESS ? gg_optim_finalize(m->opt) : st;
}

/* ---- building ---- */

static uint32_t next_random(uint32_t *s) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}

/* n values uniform in [-scale, scale] (0 for scale 0). */
static void fill_uniform(float *h, int64_t n, float scale, uint32_t *state) {
    for (int64_t i = 0; i < n; ++i)
        h[i] = scale == 0.0f ? 0.0f : scale * ((float)(next_random(state) >> 8) / 8388608.0f - 1.0f);
}

static int alloc(void **p, size_t bytes, const char *what) {
    if (cudaMalloc(p, bytes) == cudaSuccess) return 0;
    fprintf(stderr, "tm_create: cudaMalloc of %s (%zu bytes) failed\n", what, bytes);
    return -1;
}

void tm_destroy(tm_model *m) {
    if (!m) return;
    gg_optim_destroy(m->opt);
    void *bufs[] = {m->blas_workspace, m->text, m->params, m->grads, m->tokens, m->out,
                    m->logits, m->glogits, m->row_loss, m->losses, m->partials, m->counter};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; ++i) cudaFree(bufs[i]);
    for (int l = 0; l <= m->c.layers && l <= MAX_LAYERS; ++l) {
        cudaFree(m->x[l]);
        cudaFree(m->gx[l]);
        if (l < m->c.layers) {
            cudaFree(m->pre[l]);
            cudaFree(m->act[l]);
        }
    }
    if (m->blas) cublasDestroy(m->blas);
    free(m);
}

/* The canonical order of the tensors (the dump's): embedding; per layer W1, b1, W2, b2; Wout, bout. */
enum { T_EMB = 0 };
#define T_LAYER(l, k) (1 + 4 * (l) + (k))
#define T_WOUT(L) (1 + 4 * (L))
#define T_BOUT(L) (2 + 4 * (L))

static int check_config(const tm_config *c, int vocab) {
    const char *bad = NULL;
    if (c->layers < 1 || c->layers > MAX_LAYERS) bad = "layers must be 1..64";
    else if (c->context < 1 || c->embed < 1 || ((int64_t)c->context * c->embed) % 8)
        bad = "context * embed must be a positive multiple of 8";
    else if (c->embed > 1024 || (int64_t)vocab * c->embed * 4 > (48 << 10))
        bad = "embed must be <= 1024 and vocab * embed * 4 bytes <= 48 KiB (the embedding gradient's shared memory)";
    else if (c->ffn < 8 || c->ffn % 8) bad = "ffn must be a positive multiple of 8";
    else if (c->batch < 1 || c->batch > (1 << 24)) bad = "batch must be 1..2^24";
    else if (c->steps < 1) bad = "steps must be >= 1";
    else if (c->world < 1 || c->rank < 0 || c->rank >= c->world) bad = "rank must be in [0, world)";
    else if (vocab < 2 || vocab > 256) bad = "vocab must be 2..256";
    if (bad) fprintf(stderr, "tm_create: %s\n", bad);
    return bad ? -1 : 0;
}

int tm_create(gg_ctx *ctx, const tm_config *c, const uint8_t *text, int64_t n, int vocab, tm_model **out) {
    *out = NULL;
    if (check_config(c, vocab)) return -1;
    if (n <= c->context + 1) {
        fprintf(stderr, "tm_create: the text (%lld characters) is shorter than the context + 2\n", (long long)n);
        return -1;
    }
    tm_model *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->ctx = ctx;
    m->c = *c;
    const int L = c->layers;
    const int64_t M = c->batch, C = c->context, e = c->embed, D = C * e, F = c->ffn, V = vocab;
    m->hidden = D;
    m->vocab = V;
    m->n = n;

    /* the parameter buffer: tensors at 16-byte aligned offsets, the decayed ones (matrices) first */
    const int n_tensors = 3 + 4 * L;
    int64_t counts[3 + 4 * MAX_LAYERS], offsets[3 + 4 * MAX_LAYERS];
    counts[T_EMB] = V * e;
    for (int l = 0; l < L; ++l) {
        counts[T_LAYER(l, 0)] = F * D;
        counts[T_LAYER(l, 1)] = F;
        counts[T_LAYER(l, 2)] = D * F;
        counts[T_LAYER(l, 3)] = D;
    }
    counts[T_WOUT(L)] = V * D;
    counts[T_BOUT(L)] = V;
    int64_t at = 0;
    for (int pass = 0; pass < 2; ++pass) { /* matrices, then biases */
        for (int t = 0; t < n_tensors; ++t) {
            const int bias = t == T_BOUT(L) || (t >= 1 && t < T_WOUT(L) && (t - 1) % 2 == 1);
            if (bias != pass) continue;
            offsets[t] = at;
            at += (counts[t] + 3) / 4 * 4;
        }
        if (pass == 0) m->n_decay = at;
    }
    m->n_params = at;

    const size_t pbytes = (size_t)at * sizeof(float), act = (size_t)M * D * sizeof(float);
    int bad = cublasCreate(&m->blas) != CUBLAS_STATUS_SUCCESS;
    if (bad) fprintf(stderr, "tm_create: cublasCreate failed\n");
    bad = bad || cublasSetMathMode(m->blas, c->precision == GG_PRECISION_FP32 ? CUBLAS_DEFAULT_MATH
                                                                                : CUBLAS_TF32_TENSOR_OP_MATH) !=
                     CUBLAS_STATUS_SUCCESS;
    bad = bad || alloc(&m->blas_workspace, CUBLAS_WORKSPACE, "the cuBLAS workspace") ||
          alloc((void **)&m->text, (size_t)n, "the text") || alloc((void **)&m->params, pbytes, "parameters") ||
          alloc((void **)&m->grads, pbytes, "gradients") ||
          alloc((void **)&m->tokens, (size_t)M * (C + 1) * sizeof(int32_t), "tokens") ||
          alloc((void **)&m->out, act, "a layer's output") ||
          alloc((void **)&m->logits, (size_t)M * V * sizeof(float), "logits") ||
          alloc((void **)&m->glogits, (size_t)M * V * sizeof(float), "the logits' gradient") ||
          alloc((void **)&m->row_loss, (size_t)M * sizeof(float), "row losses") ||
          alloc((void **)&m->losses, (size_t)c->steps * sizeof(float), "losses") ||
          alloc((void **)&m->partials, tk_embed_partials_count((int)V, (int)e) * sizeof(float), "partials") ||
          alloc((void **)&m->counter, sizeof(int64_t), "the step counter");
    for (int l = 0; !bad && l <= L; ++l) {
        bad = alloc((void **)&m->x[l], act, "activations") || alloc((void **)&m->gx[l], act, "gradients");
        if (!bad && l < L)
            bad = alloc((void **)&m->pre[l], (size_t)M * F * sizeof(float), "pre-activations") ||
                  alloc((void **)&m->act[l], (size_t)M * F * sizeof(float), "activations");
    }
    if (bad) {
        tm_destroy(m);
        return -1;
    }

    /* initial weights: PyTorch's nn.Linear range for W1 and Wout, the residual branch's W2 scaled by 1/sqrt(L) so
     * that the stack's output stays of the embedding's size without normalization; biases zero */
    float *h = malloc(pbytes);
    if (!h) {
        tm_destroy(m);
        return -1;
    }
    memset(h, 0, pbytes);
    uint32_t state = 2463534242u ^ (c->init_seed * 2654435761u);
    if (!state) state = 1;
    fill_uniform(h + offsets[T_EMB], counts[T_EMB], 1.0f, &state);
    for (int l = 0; l < L; ++l) {
        fill_uniform(h + offsets[T_LAYER(l, 0)], counts[T_LAYER(l, 0)], 1.0f / sqrtf((float)D), &state);
        fill_uniform(h + offsets[T_LAYER(l, 2)], counts[T_LAYER(l, 2)], 1.0f / sqrtf((float)F * L), &state);
    }
    fill_uniform(h + offsets[T_WOUT(L)], counts[T_WOUT(L)], 1.0f / sqrtf((float)D), &state);
    const int64_t zero = 0;
    bad = cudaMemcpy(m->params, h, pbytes, cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemcpy(m->text, text, (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemcpy(m->counter, &zero, sizeof zero, cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaMemset(m->grads, 0, pbytes) != cudaSuccess;
    free(h);
    if (bad) {
        fprintf(stderr, "tm_create: copying the initial state failed\n");
        tm_destroy(m);
        return -1;
    }

    m->emb = m->params + offsets[T_EMB];
    m->gemb = m->grads + offsets[T_EMB];
    m->wout = m->params + offsets[T_WOUT(L)];
    m->gwout = m->grads + offsets[T_WOUT(L)];
    m->bout = m->params + offsets[T_BOUT(L)];
    m->gbout = m->grads + offsets[T_BOUT(L)];
    for (int l = 0; l < L; ++l) {
        tm_layer *y = &m->layers[l];
        y->model = m;
        y->index = l;
        float **p[4] = {&y->w1, &y->b1, &y->w2, &y->b2}, **g[4] = {&y->gw1, &y->gb1, &y->gw2, &y->gb2};
        for (int k = 0; k < 4; ++k) {
            *p[k] = m->params + offsets[T_LAYER(l, k)];
            *g[k] = m->grads + offsets[T_LAYER(l, k)];
        }
        y->args = (gg_mlp_args){.grad_output = m->gx[l + 1], .hidden_states = m->x[l], .weight1 = y->w1,
                                .weight2 = y->w2, .intermediate = m->pre[l], .intermediate_activated = m->act[l],
                                .grad_hidden_states = m->gx[l], .grad_weight1 = y->gw1, .grad_bias1 = y->gb1,
                                .grad_weight2 = y->gw2, .grad_bias2 = y->gb2,
                                /* the residual path: x + MLP(x) passes the layer's grad_output straight through,
                                 * added in the dX GEMM */
                                .grad_residual = m->gx[l + 1]};
    }
    if (make_optimizer(m, offsets, counts, n_tensors) != GG_SUCCESS) {
        fprintf(stderr, "tm_create: the optimizer: %s\n", gg_last_error(ctx));
        tm_destroy(m);
        return -1;
    }
    if (warm_up(m)) {
        tm_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

/* Every parameter tensor in the canonical order: its offset in the parameter buffer and its element count. */
static int canonical(const tm_model *m, int64_t *offset, int64_t *count) {
    const int64_t D = m->hidden, F = m->c.ffn, V = m->vocab;
    int t = 0;
    offset[t] = m->emb - m->params, count[t++] = V * m->c.embed;
    for (int l = 0; l < m->c.layers; ++l) {
        const tm_layer *y = &m->layers[l];
        offset[t] = y->w1 - m->params, count[t++] = F * D;
        offset[t] = y->b1 - m->params, count[t++] = F;
        offset[t] = y->w2 - m->params, count[t++] = D * F;
        offset[t] = y->b2 - m->params, count[t++] = D;
    }
    offset[t] = m->wout - m->params, count[t++] = V * D;
    offset[t] = m->bout - m->params, count[t++] = V;
    return t;
}

/* The tensors of buffer `from` (parameters or gradients: the same offsets), back to back in canonical order. */
static int copy_canonical(const tm_model *m, const float *from, float *to) {
    int64_t offset[3 + 4 * MAX_LAYERS], count[3 + 4 * MAX_LAYERS], at = 0;
    const int n = canonical(m, offset, count);
    for (int t = 0; t < n; at += count[t++])
        if (cudaMemcpy(to + at, from + offset[t], (size_t)count[t] * sizeof(float), cudaMemcpyDeviceToHost) !=
            cudaSuccess)
            return -1;
    return 0;
}

int64_t tm_param_count(const tm_model *m) {
    int64_t offset[3 + 4 * MAX_LAYERS], count[3 + 4 * MAX_LAYERS], total = 0;
    const int n = canonical(m, offset, count);
    for (int t = 0; t < n; ++t) total += count[t];
    return total;
}

int tm_snapshot(tm_model *m, float *params, float *grads, int32_t *tokens) {
    if (cudaDeviceSynchronize() != cudaSuccess) return -1;
    if (params && copy_canonical(m, m->params, params)) return -1;
    if (grads && copy_canonical(m, m->grads, grads)) return -1;
    const size_t bytes = (size_t)m->c.batch * (size_t)(m->c.context + 1) * sizeof(int32_t);
    return tokens && cudaMemcpy(tokens, m->tokens, bytes, cudaMemcpyDeviceToHost) != cudaSuccess ? -1 : 0;
}

int tm_poison_gradients(tm_model *m) {
    return cudaMemset(m->grads, 0xff, (size_t)m->n_params * sizeof(float)) == cudaSuccess ? 0 : -1;
}

int tm_dump_init(tm_model *m, const char *path) {
    const int64_t n = tm_param_count(m);
    float *h = malloc((size_t)n * sizeof(float));
    FILE *f = fopen(path, "wb");
    const int32_t head[6] = {(int32_t)m->vocab, m->c.context, m->c.embed, m->c.layers, (int32_t)m->hidden,
                             (int32_t)m->c.ffn};
    int bad = !h || !f || tm_snapshot(m, h, NULL, NULL) || fwrite("GGTRAIN1", 1, 8, f) != 8 ||
              fwrite(head, 4, 6, f) != 6 || fwrite(h, sizeof(float), (size_t)n, f) != (size_t)n;
    if (f && fclose(f)) bad = 1;
    free(h);
    if (bad) fprintf(stderr, "tm_dump_init: writing %s failed\n", path);
    return bad ? -1 : 0;
}

gg_status tm_build_step(tm_model *m, gg_step **out) {
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.policy = GG_BUCKETS_LIST;
    sc.bucket_tokens = &m->c.batch;
    sc.n_buckets = 1;
    gg_step *step = NULL;
    gg_status st = gg_step_create(m->ctx, &sc, &step);
    if (st == GG_SUCCESS) st = gg_step_add_callback(step, forward, m);
    if (st == GG_SUCCESS) st = gg_step_add_callback(step, loss, m);
    /* the gradients the callbacks make join the step's reduction across GPUs (with one GPU it does nothing) right
     * after the callback that makes them */
    if (st == GG_SUCCESS) st = gg_step_add_reduce(step, m->gwout, (size_t)(m->vocab * m->hidden), 0);
    if (st == GG_SUCCESS) st = gg_step_add_reduce(step, m->gbout, (size_t)m->vocab, 0);
    const gg_mlp_desc desc = layer_desc(m);
    for (int l = m->c.layers - 1; l >= 0 && st == GG_SUCCESS; --l) {
        st = gg_step_add_mlp(step, &desc, &m->layers[l].args);
    }
    if (st == GG_SUCCESS) st = gg_step_add_callback(step, embedding_backward, m);
    if (st == GG_SUCCESS) st = gg_step_add_reduce(step, m->gemb, (size_t)(m->vocab * m->c.embed), 0);
    /* after every gradient is final (side streams and reductions joined): the whole training step is one launch */
    if (st == GG_SUCCESS) st = gg_step_add_optimizer(step, m->opt);
    if (st == GG_SUCCESS) st = gg_step_finalize(step);
    if (st != GG_SUCCESS) {
        gg_step_destroy(step);
        step = NULL;
    }
    *out = step;
    return st;
}

gg_status tm_train_step(tm_model *m, gg_step *step, cudaStream_t stream) {
    if (step) {
        const gg_status st = gg_step_run(step, m->c.batch, 0, (gg_stream)stream);
        return st == GG_SUCCESS && m->error ? GG_ERROR_CUDA : st;
    }
    gg_status st = eager_step(m, (gg_stream)stream);
    /* what the step graph holds after the backward: the all-reduce (one call: every gradient is in one buffer),
     * then the update */
    if (st == GG_SUCCESS && m->c.world > 1)
        st = gg_dist_reduce(m->ctx, m->grads, (size_t)m->n_params, 0, (gg_stream)stream);
    if (st == GG_SUCCESS) st = gg_optim_step(m->opt, (gg_stream)stream);
    return st == GG_SUCCESS && m->error ? GG_ERROR_CUDA : st;
}

int tm_losses(tm_model *m, float *host, int64_t count) {
    if (count > m->c.steps) count = m->c.steps;
    return cudaMemcpy(host, m->losses, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}

/* ---- checkpoints ---- */

#define CHECKPOINT_MARK "GGTRCKP1"

int tm_save_checkpoint(tm_model *m, const char *path) {
    size_t state_bytes = 0;
    int64_t step = 0;
    const size_t pbytes = (size_t)m->n_params * sizeof(float);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return -1;
    if (gg_optim_state_size(m->opt, &state_bytes) != GG_SUCCESS) {
        fprintf(stderr, "tm_save_checkpoint: %s\n", gg_last_error(m->ctx));
        return -1;
    }
    void *state = malloc(state_bytes);
    float *params = malloc(pbytes);
    int bad = !state || !params;
    /* gg_optim_save_state waits for the device: the steps enqueued before are in what is read after it too */
    if (!bad && gg_optim_save_state(m->opt, state, state_bytes) != GG_SUCCESS) {
        fprintf(stderr, "tm_save_checkpoint: %s\n", gg_last_error(m->ctx));
        bad = 1;
    }
    bad = bad || cudaMemcpy(params, m->params, pbytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
          cudaMemcpy(&step, m->counter, sizeof step, cudaMemcpyDeviceToHost) != cudaSuccess;
    /* written beside and renamed over: a run stopped while writing leaves the previous checkpoint whole */
    FILE *f = bad ? NULL : fopen(tmp, "wb");
    const uint64_t n = (uint64_t)m->n_params, sb = state_bytes;
    bad = bad || !f || fwrite(CHECKPOINT_MARK, 1, 8, f) != 8 || fwrite(&step, sizeof step, 1, f) != 1 ||
          fwrite(&n, sizeof n, 1, f) != 1 || fwrite(params, 1, pbytes, f) != pbytes ||
          fwrite(&sb, sizeof sb, 1, f) != 1 || fwrite(state, 1, state_bytes, f) != state_bytes;
    if (f && fclose(f)) bad = 1;
    if (!bad && rename(tmp, path) != 0) bad = 1;
    if (bad) {
        fprintf(stderr, "tm_save_checkpoint: writing %s failed\n", path);
        remove(tmp);
    }
    free(state);
    free(params);
    return bad ? -1 : 0;
}

int tm_load_checkpoint(tm_model *m, const char *path, int64_t *step) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tm_load_checkpoint: cannot open %s\n", path);
        return -1;
    }
    char mark[8];
    int64_t at = 0;
    uint64_t n = 0, state_bytes = 0;
    size_t want_state = 0;
    float *params = NULL;
    void *state = NULL;
    const char *why = NULL;
    if (gg_optim_state_size(m->opt, &want_state) != GG_SUCCESS)
        why = gg_last_error(m->ctx);
    else if (fread(mark, 1, 8, f) != 8 || memcmp(mark, CHECKPOINT_MARK, 8) != 0)
        why = "not a checkpoint of examples/train";
    else if (fread(&at, sizeof at, 1, f) != 1 || fread(&n, sizeof n, 1, f) != 1)
        why = "cut short";
    else if (at < 0 || at >= m->c.steps)
        why = "its step is not below --steps";
    else if (n != (uint64_t)m->n_params)
        why = "its parameters are another model's (--layers, --context, --embed, --ffn)";
    else if (!(params = malloc(n * sizeof(float))) || fread(params, sizeof(float), n, f) != n ||
             fread(&state_bytes, sizeof state_bytes, 1, f) != 1)
        why = "cut short";
    else if (state_bytes != want_state)
        why = "its optimizer state is another optimizer's";
    else if (!(state = malloc(state_bytes)) || fread(state, 1, state_bytes, f) != state_bytes)
        why = "cut short";
    fclose(f);
    int bad = why != NULL;
    if (bad) fprintf(stderr, "tm_load_checkpoint: %s: %s\n", path, why);
    /* the optimizer checks its state before it writes anything; then the weights and the step counter */
    if (!bad && gg_optim_load_state(m->opt, state, state_bytes) != GG_SUCCESS) {
        fprintf(stderr, "tm_load_checkpoint: %s: %s\n", path, gg_last_error(m->ctx));
        bad = 1;
    }
    if (!bad && (cudaMemcpy(m->params, params, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
                 cudaMemcpy(m->counter, &at, sizeof at, cudaMemcpyHostToDevice) != cudaSuccess ||
                 cudaDeviceSynchronize() != cudaSuccess)) {
        fprintf(stderr, "tm_load_checkpoint: copying %s to the GPU failed\n", path);
        bad = 1;
    }
    free(params);
    free(state);
    if (!bad) *step = at;
    return bad ? -1 : 0;
}
