/*
 * train.c - a character-level language model trained with gradgraph: every training step (forward, loss, backward,
 * update) as one step graph (train_model.h), on a public-domain text (examples/data/tinyshakespeare.txt).
 *
 *   train [--text FILE] [--steps N] [--batch M] [--layers L] [--context C] [--embed E] [--ffn F]
 *         [--precision fp32|tf32|fp16] [--lr LR] [--weight-decay WD] [--seed S] [--init-seed S] [--gpus N]
 *         [--eager] [--log-every N] [--warmup N] [--csv FILE] [--json FILE] [--dump-init FILE] [--check N]
 *         [--save FILE] [--save-every N] [--resume FILE]
 *
 * Defaults: 8 layers, context 16 characters of embedding 32 (D = 512), F = 4 D, 2048 rows (characters predicted)
 * per step and GPU, 2000 steps, fp32, AdamW lr 1e-3, weight decay 0.01 on the matrices and the embedding.
 * --precision fp16 rounds the MLPs' operands to fp16 with no loss scaling (gradients below 2^-14 lose bits; the
 * twin's fp16 autocast runs without a GradScaler too). Prints a progress line every --log-every steps (step, loss,
 * tokens/s). --eager runs the same steps as separate calls without graphs (the same kernels). --gpus N: data parallel
 * over N GPUs, one thread each (gg_dist_init_threads), each with its own rows of every step, the gradients
 * averaged; the losses printed are GPU 0's. --csv writes "step,loss" for every step, --json a summary with every
 * loss and the time per step (CUDA events over the steps after --warmup, default 10). --dump-init writes the
 * initial weights for bench/peers/train_torch.py and exits. --save writes a checkpoint after the last step (the step
 * counter, the weights and AdamW's state: gg_optim_save_state), and with --save-every N also after every N-th step
 * (each replacing the one before; inside the timed steps), --resume starts from one, at the step it holds, and
 * trains up to --steps: a run of 2N steps and a run of N steps resumed to 2N end with the same bytes in their
 * checkpoints (tests/scripts/train_resume.sh); the losses, --csv and --json then cover the steps run.
 * --check N first holds one eager step's loss and every parameter gradient to a float64 CPU reference
 * (train_ref.h; minutes on the CPU at the default size: use a small model, e.g. --embed 8), then trains N steps as
 * step graphs and N steps eagerly from the same initial weights and compares the losses (within 1e-4 relative in
 * fp32, 1e-3 otherwise); exit 1 when either check fails. A run exits 1 when its last loss is not finite, 77
 * without a GPU (or with fewer than --gpus).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_model.h"
#include "train_ref.h"

#ifndef GG_TRAIN_TEXT
#define GG_TRAIN_TEXT "examples/data/tinyshakespeare.txt"
#endif
#define MAX_GPUS 8

typedef struct options {
    tm_config model;
    const char *text, *csv, *json, *dump, *save, *resume;
    int gpus, eager, log_every, warmup, check;
    int64_t save_every;
} options;

typedef struct corpus {
    uint8_t *ids; /* the text as vocabulary ids */
    int64_t n;
    int vocab;
} corpus;

/* What the ranks of a data-parallel run share: a barrier after setup, so that no rank enters the first collective
 * (finalizing a syncing step, or the first all-reduce) while another has failed, and how many failed. */
typedef struct rank_sync {
    pthread_barrier_t ready;
    int failed; /* ranks whose setup failed (under lock) */
    pthread_mutex_t lock;
} rank_sync;

typedef struct rank_job {
    const options *o;
    const corpus *text;
    rank_sync *sync; /* NULL on one GPU */
    gg_ctx *ctx;
    int rank, rc;
    int launches; /* launches per step (0: eager) */
    int64_t start; /* the first step run: 0, or the resumed checkpoint's */
    double step_us;
    float *losses; /* rank 0: every step's loss */
} rank_job;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The text's distinct bytes, sorted, are the vocabulary (the PyTorch twin builds it the same way). */
static int read_corpus(const char *path, corpus *out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "train: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    out->ids = size > 0 ? malloc((size_t)size) : NULL;
    if (!out->ids || fread(out->ids, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "train: cannot read %s\n", path);
        fclose(f);
        free(out->ids);
        return -1;
    }
    fclose(f);
    int map[256], seen[256] = {0};
    for (long i = 0; i < size; ++i) seen[out->ids[i]] = 1;
    out->vocab = 0;
    for (int b = 0; b < 256; ++b) map[b] = seen[b] ? out->vocab++ : -1;
    for (long i = 0; i < size; ++i) out->ids[i] = (uint8_t)map[out->ids[i]];
    out->n = size;
    return 0;
}

static gg_precision parse_precision(const char *s) {
    return !strcmp(s, "fp32") ? GG_PRECISION_FP32
           : !strcmp(s, "tf32") ? GG_PRECISION_TF32
           : !strcmp(s, "fp16") ? GG_PRECISION_FP16
                                : GG_PRECISION_DEFAULT;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){.model = {.layers = 8, .context = 16, .embed = 32, .ffn = 0, .batch = 2048,
                             .precision = GG_PRECISION_FP32, .data_seed = 1234, .init_seed = 1, .lr = 1e-3f,
                             .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f, .steps = 2000,
                             .world = 1},
                   .text = GG_TRAIN_TEXT, .gpus = 1, .log_every = 100, .warmup = 10};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "--eager")) o->eager = 1, used = 0;
        else if (!v) used = -1;
        else if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--steps")) o->model.steps = atoll(v);
        else if (!strcmp(a, "--batch")) o->model.batch = atoll(v);
        else if (!strcmp(a, "--layers")) o->model.layers = atoi(v);
        else if (!strcmp(a, "--context")) o->model.context = atoi(v);
        else if (!strcmp(a, "--embed")) o->model.embed = atoi(v);
        else if (!strcmp(a, "--ffn")) o->model.ffn = atoll(v);
        else if (!strcmp(a, "--precision")) o->model.precision = parse_precision(v);
        else if (!strcmp(a, "--lr")) o->model.lr = strtof(v, NULL);
        else if (!strcmp(a, "--weight-decay")) o->model.weight_decay = strtof(v, NULL);
        else if (!strcmp(a, "--seed")) o->model.data_seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--init-seed")) o->model.init_seed = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--gpus")) o->gpus = atoi(v);
        else if (!strcmp(a, "--log-every")) o->log_every = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--csv")) o->csv = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--dump-init")) o->dump = v;
        else if (!strcmp(a, "--check")) o->check = atoi(v);
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--save-every")) o->save_every = atoll(v);
        else if (!strcmp(a, "--resume")) o->resume = v;
        else used = -1;
        if (used < 0) {
            fprintf(stderr, "train: unknown or incomplete option %s (see the comment at the top of train.c)\n", a);
            return -1;
        }
        i += used;
    }
    if (!o->model.ffn) o->model.ffn = 4 * (int64_t)o->model.context * o->model.embed;
    if (o->check > 0) {
        o->model.steps = o->check;
        if (o->warmup >= o->check) o->warmup = 0;
    }
    const char *bad = o->model.precision == GG_PRECISION_DEFAULT ? "--precision must be fp32, tf32 or fp16"
                      : o->gpus < 1 || o->gpus > MAX_GPUS         ? "--gpus must be 1..8"
                      : o->log_every < 1                          ? "--log-every must be >= 1"
                      : o->warmup < 0 || o->warmup >= o->model.steps ? "--warmup must be in [0, steps)"
                      : o->check && o->gpus > 1                   ? "--check runs on one GPU"
                      : o->check && (o->save || o->resume)        ? "--check trains from the initial weights"
                      : o->save_every < 0 || (o->save_every && !o->save) ? "--save-every needs --save and N >= 0"
                                                                  : NULL;
    if (bad) fprintf(stderr, "train: %s\n", bad);
    o->model.world = o->gpus;
    return bad ? -1 : 0;
}

/* Trains o->model.steps steps on job->ctx (rank job->rank): rank 0 prints, times and keeps the losses. */
static void *train_rank(void *arg) {
    rank_job *job = arg;
    const options *o = job->o;
    tm_config c = o->model;
    c.rank = job->rank;
    job->rc = 1;
    cudaSetDevice(job->rank);
    if (o->gpus > 1) gg_dist_bind_thread(job->ctx);
    tm_model *m = NULL;
    gg_step *step = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    int ok = !tm_create(job->ctx, &c, job->text->ids, job->text->n, job->text->vocab, &m) &&
             cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
             cudaEventCreate(&ev[0]) == cudaSuccess && cudaEventCreate(&ev[1]) == cudaSuccess;
    if (job->sync) { /* every rank ready, or every rank stops, before the first collective (finalizing the step) */
        pthread_mutex_lock(&job->sync->lock);
        job->sync->failed += !ok;
        pthread_mutex_unlock(&job->sync->lock);
        pthread_barrier_wait(&job->sync->ready);
        pthread_mutex_lock(&job->sync->lock);
        ok = ok && !job->sync->failed;
        pthread_mutex_unlock(&job->sync->lock);
    }
    if (!ok) goto done;
    int64_t start = 0;
    if (o->resume && tm_load_checkpoint(m, o->resume, &start)) goto done;
    job->start = start;
    /* collective with a communicator: a rank's failure fails it on every rank (GG_ERROR_PEER on the others) */
    if (!o->eager && tm_build_step(m, &step) != GG_SUCCESS) {
        fprintf(stderr, "train: building the step graph: %s\n", gg_last_error(job->ctx));
        goto done;
    }
    const int64_t tokens = c.batch * c.world;
    const int64_t timed_from = start + o->warmup < c.steps ? start + o->warmup : start;
    double t_last = now_s();
    int64_t last = start;
    for (int64_t i = start; i < c.steps; ++i) {
        if (i == timed_from) cudaEventRecord(ev[0], s);
        const gg_status st = tm_train_step(m, step, s);
        if (st != GG_SUCCESS) {
            const char *cb = tm_callback_error(m);
            fprintf(stderr, "train: step %lld: %s\n", (long long)i, cb ? cb : gg_last_error(job->ctx));
            goto done;
        }
        if (job->rank == 0 && ((i + 1) % o->log_every == 0 || i + 1 == c.steps)) {
            if (cudaStreamSynchronize(s) != cudaSuccess || tm_losses(m, job->losses, i + 1)) goto done;
            const double t = now_s();
            printf("step %6lld  loss %.4f  %.0f tokens/s\n", (long long)(i + 1), job->losses[i],
                   (double)(i + 1 - last) * (double)tokens / (t - t_last));
            fflush(stdout);
            t_last = t, last = i + 1;
        }
        if (job->rank == 0 && o->save_every && (i + 1) % o->save_every == 0 && i + 1 < c.steps &&
            tm_save_checkpoint(m, o->save))
            goto done;
    }
    cudaEventRecord(ev[1], s);
    float ms = 0;
    if (cudaEventSynchronize(ev[1]) != cudaSuccess || cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess) goto done;
    job->step_us = 1e3 * ms / (double)(c.steps - timed_from);
    if (job->rank == 0 && tm_losses(m, job->losses, c.steps)) goto done;
    if (job->rank == 0 && o->save && tm_save_checkpoint(m, o->save)) goto done;
    job->launches = step ? 1 : 0; /* tm_train_step with a step graph is one gg_step_run, one cudaGraphLaunch */
    job->rc = 0;
done:
    if (ev[0]) cudaEventDestroy(ev[0]);
    if (ev[1]) cudaEventDestroy(ev[1]);
    if (s) cudaStreamDestroy(s);
    gg_step_destroy(step);
    tm_destroy(m);
    return NULL;
}

static const char *precision_name(gg_precision p) { return gg_precision_string(p); }

static int write_outputs(const options *o, const corpus *text, const rank_job *job) {
    const tm_config *c = &o->model;
    const int64_t start = job->start, run = c->steps - start; /* the steps this run made */
    if (o->csv) {
        FILE *f = fopen(o->csv, "w");
        if (!f) return -1;
        fprintf(f, "step,loss\n");
        for (int64_t i = start; i < c->steps; ++i) fprintf(f, "%lld,%.9g\n", (long long)i, job->losses[i]);
        if (fclose(f)) return -1;
    }
    if (!o->json) return 0;
    FILE *f = fopen(o->json, "w");
    if (!f) return -1;
    const int64_t tail = run < 50 ? run : 50;
    double last = 0;
    for (int64_t i = c->steps - tail; i < c->steps; ++i) last += job->losses[i];
    fprintf(f,
            "{\"mode\": \"%s\", \"precision\": \"%s\", \"gpus\": %d, \"layers\": %d, \"context\": %d, \"embed\": %d, "
            "\"hidden\": %lld, \"ffn\": %lld, \"vocab\": %d, \"batch\": %lld, \"steps\": %lld, \"first_step\": %lld, "
            "\"warmup\": %d, \"graph_launches_per_step\": %d, \"loss_first\": %.9g, "
            "\"loss_last\": %.9g, \"loss_last_steps\": %lld, \"step_us\": %.3f, \"tokens_per_s\": %.1f, \"losses\": [",
            o->eager ? "eager" : "graph", precision_name(c->precision), o->gpus, c->layers, c->context, c->embed,
            (long long)c->context * c->embed, (long long)c->ffn, text->vocab, (long long)c->batch, (long long)c->steps,
            (long long)start, o->warmup, job->launches, job->losses[start], last / (double)tail, (long long)tail,
            job->step_us, 1e6 * (double)(c->batch * o->gpus) / job->step_us);
    for (int64_t i = start; i < c->steps; ++i) fprintf(f, "%s%.9g", i > start ? ", " : "", job->losses[i]);
    fprintf(f, "]}\n");
    return fclose(f) ? -1 : 0;
}

/* The first step's loss and every parameter gradient against the float64 reference (train_ref.h), the gradients
 * poisoned (NaN) before the step. Each gradient element within tol x the largest |reference| of its tensor, the
 * loss within tol / 10 relative: tol 1e-3 in fp32 (fp32 GEMMs over K <= a few thousand terms err ~1e-6 of that
 * scale; the margin covers the GELU's tanhf), 2e-2 in tf32 and fp16 (10-bit mantissas). */
static int check_reference(const options *o, const corpus *text, gg_ctx *ctx) {
    tm_model *m = NULL;
    if (tm_create(ctx, &o->model, text->ids, text->n, text->vocab, &m)) return 1;
    const tr_shape shape = {o->model.layers, o->model.context, o->model.embed, text->vocab, o->model.ffn,
                            o->model.batch};
    const int64_t n = tm_param_count(m);
    float *params = malloc((size_t)n * sizeof(float)), *grads = malloc((size_t)n * sizeof(float)), loss = NAN;
    double *ref = malloc((size_t)n * sizeof(double));
    int32_t *tokens = malloc((size_t)o->model.batch * (size_t)(o->model.context + 1) * sizeof(int32_t));
    int rc = 1;
    if (!params || !grads || !ref || !tokens || tm_snapshot(m, params, NULL, NULL) || tm_poison_gradients(m) ||
        tm_train_step(m, NULL, NULL) != GG_SUCCESS || tm_snapshot(m, NULL, grads, tokens) || tm_losses(m, &loss, 1)) {
        fprintf(stderr, "check: the reference step failed: %s\n", gg_last_error(ctx));
        goto out;
    }
    const double ref_loss = tr_step(&shape, params, tokens, ref);
    const double tol = o->model.precision == GG_PRECISION_FP32 ? 1e-3 : 2e-2;
    const double loss_err = fabs(loss - ref_loss) / fabs(ref_loss);
    int bad = !(loss_err <= tol / 10);
    double worst = 0;
    int64_t at = 0;
    for (int t = 0; t < tr_tensors(&shape); at += tr_count(&shape, t++)) {
        double scale = 0, err = 0;
        for (int64_t i = at; i < at + tr_count(&shape, t); ++i) scale = fmax(scale, fabs(ref[i]));
        for (int64_t i = at; i < at + tr_count(&shape, t); ++i) {
            const double d = fabs(grads[i] - ref[i]);
            err = d == d ? fmax(err, d) : INFINITY;
        }
        const double rel = scale > 0 ? err / scale : err;
        worst = fmax(worst, rel);
        if (!(rel <= tol)) {
            bad = 1;
            printf("check: parameter tensor %d (canonical order): gradient off by %.3g of its largest value\n", t, rel);
        }
    }
    printf("check: first step against the float64 reference: loss %.6f (reference %.6f, relative %.2g), "
           "gradients within %.3g of each tensor's largest (limit %g): %s\n",
           loss, ref_loss, loss_err, worst, tol, bad ? "FAILED" : "ok");
    rc = bad;
out:
    free(params), free(grads), free(ref), free(tokens);
    tm_destroy(m);
    return rc;
}

/* --check: the reference check above, then the same steps as step graphs and eagerly, from the same initial
 * weights; their losses compared. */
static int check(options *o, const corpus *text, gg_ctx *ctx) {
    if (check_reference(o, text, ctx)) return 1;
    float *loss[2] = {calloc((size_t)o->check, 4), calloc((size_t)o->check, 4)};
    int rc = 1;
    for (int eager = 0; eager < 2 && loss[0] && loss[1]; ++eager) {
        o->eager = eager;
        rank_job job = {.o = o, .text = text, .ctx = ctx, .losses = loss[eager]};
        train_rank(&job);
        if (job.rc) goto out;
    }
    double worst = 0;
    for (int i = 0; i < o->check; ++i) {
        const double d = fabs((double)loss[0][i] - loss[1][i]) / fabs((double)loss[1][i]);
        worst = d == d ? fmax(worst, d) : INFINITY;
    }
    const double tol = o->model.precision == GG_PRECISION_FP32 ? 1e-4 : 1e-3;
    printf("check: %d steps, step graph against eager: largest relative loss difference %.3g (limit %g): %s\n",
           o->check, worst, tol, worst <= tol ? "ok" : "FAILED");
    rc = worst <= tol ? 0 : 1;
out:
    free(loss[0]);
    free(loss[1]);
    return rc;
}

int main(int argc, char **argv) {
    options o;
    corpus text = {0};
    if (parse(argc, argv, &o) || read_corpus(o.text, &text)) return 2;
    gg_ctx *ctx[MAX_GPUS] = {0};
    int rc = 1;
    for (int g = 0; g < o.gpus; ++g) {
        gg_config cfg = GG_CONFIG_INIT;
        cfg.device = g;
        cfg.precision = o.model.precision;
        const gg_status st = gg_ctx_create(&cfg, &ctx[g]);
        if (st == GG_ERROR_NO_DEVICE) {
            printf("skipped: %s\n", gg_last_error(NULL));
            rc = 77;
            goto out;
        }
        if (st != GG_SUCCESS) {
            fprintf(stderr, "train: gg_ctx_create (GPU %d): %s\n", g, gg_last_error(NULL));
            goto out;
        }
    }
    if (o.gpus > 1 && gg_dist_init_threads(ctx, o.gpus, NULL) != GG_SUCCESS) {
        fprintf(stderr, "train: gg_dist_init_threads: %s\n", gg_last_error(ctx[0]));
        goto out;
    }
    printf("train: %s, vocab %d, %d layers, D = %d x %d = %d, F = %lld, %lld rows x %d GPU(s), %lld steps, %s, %s\n",
           o.text, text.vocab, o.model.layers, o.model.context, o.model.embed, o.model.context * o.model.embed,
           (long long)o.model.ffn, (long long)o.model.batch, o.gpus, (long long)o.model.steps,
           precision_name(o.model.precision), o.eager ? "eager" : "step graph");
    if (o.check) {
        rc = check(&o, &text, ctx[0]);
        goto out;
    }
    if (o.dump) { /* only the initial weights: build the model, write them, stop */
        tm_model *m = NULL;
        rc = tm_create(ctx[0], &o.model, text.ids, text.n, text.vocab, &m) || tm_dump_init(m, o.dump);
        tm_destroy(m);
        goto out;
    }
    rank_job jobs[MAX_GPUS];
    pthread_t threads[MAX_GPUS];
    rank_sync sync = {.failed = 0};
    float *losses = calloc((size_t)o.model.steps, sizeof(float));
    if (!losses) goto out;
    for (int g = 0; g < o.gpus; ++g)
        jobs[g] = (rank_job){.o = &o, .text = &text, .sync = o.gpus > 1 ? &sync : NULL, .ctx = ctx[g], .rank = g,
                             .losses = losses};
    if (o.gpus == 1) train_rank(&jobs[0]);
    else {
        pthread_barrier_init(&sync.ready, NULL, (unsigned)o.gpus);
        pthread_mutex_init(&sync.lock, NULL);
        int started = 0;
        for (; started < o.gpus; ++started)
            if (pthread_create(&threads[started], NULL, train_rank, &jobs[started])) break;
        if (started < o.gpus) { /* the started ranks wait at the barrier for the others: an error ends the run */
            fprintf(stderr, "train: pthread_create failed\n");
            exit(1);
        }
        for (int g = 0; g < o.gpus; ++g) pthread_join(threads[g], NULL);
        pthread_barrier_destroy(&sync.ready);
        pthread_mutex_destroy(&sync.lock);
    }
    rc = 0;
    for (int g = 0; g < o.gpus; ++g) rc |= jobs[g].rc;
    if (!rc && !isfinite(losses[o.model.steps - 1])) {
        fprintf(stderr, "train: the last step's loss is %g: training diverged\n", losses[o.model.steps - 1]);
        rc = 1;
    }
    if (!rc) {
        printf("train: %lld steps, loss %.4f -> %.4f, %.1f us per step (%s)\n", (long long)o.model.steps,
               losses[jobs[0].start], losses[o.model.steps - 1], jobs[0].step_us, o.eager ? "eager" : "step graph");
        if (jobs[0].start) printf("train: resumed at step %lld from %s\n", (long long)jobs[0].start, o.resume);
        if (o.save) printf("train: checkpoint written to %s\n", o.save);
        if (write_outputs(&o, &text, &jobs[0])) {
            fprintf(stderr, "train: writing --csv / --json failed\n");
            rc = 1;
        }
    }
    free(losses);
out:
    for (int g = 0; g < o.gpus; ++g) gg_ctx_destroy(ctx[g]);
    free(text.ids);
    return rc;
}
