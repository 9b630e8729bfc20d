/*
 * case_runner.h - one benchmark case on the GPU, end to end: device tensors, inputs drawn as the spec says, the
 * float64 GPU reference, NaN-poisoned outputs, the library call and the tolerance check. Shared by the GPU tests
 * and the benchmark so both check the same way.
 */
#ifndef GG_CASE_RUNNER_H
#define GG_CASE_RUNNER_H

#include "cases.h"
#include "gpu_harness.h"
#include "gradgraph.h"

#define GG_RUN_MAX_TENSORS 8

typedef enum gg_elem { GG_ELEM_F32 = 4, GG_ELEM_BF16 = 2 } gg_elem;

typedef struct gg_tensor {
    const char *name;
    gg_elem elem;
    int64_t rows, cols;
    float scale; /* inputs: the N(0,1) scale the spec gives */
    void *dev;   /* device memory */
    double *ref; /* outputs: float64 reference on the device */
    int param;   /* outputs: a parameter gradient (accumulated with desc.accumulate), not an activation gradient */
    int dist;    /* dev is gg_dist_alloc's (gg_case_run_dist_grads) */
    void *alloc; /* the allocation dev lies in: guard bytes before dev and after its end (outputs, when asked) */
    size_t guard;
} gg_tensor;

/* A tensor's element count and size in bytes. */
static inline size_t gg_case_tensor_elems(const gg_tensor *t) { return (size_t)t->rows * (size_t)t->cols; }
static inline size_t gg_case_tensor_bytes(const gg_tensor *t) { return gg_case_tensor_elems(t) * (size_t)t->elem; }

typedef struct gg_case_run {
    gg_case c;
    gg_tensor in[GG_RUN_MAX_TENSORS];
    gg_tensor out[GG_RUN_MAX_TENSORS];
    int n_in, n_out;
    double *work;        /* the reference's scratch */
    void *compare_scratch;
    void *cublas;        /* cublasHandle_t for the reference */
    gg_stream stream;
    int accumulate;      /* passed to the library's desc: add parameter gradients instead of overwriting */
    size_t device_bytes; /* allocated by the runner */
    gg_ctx *grads_ctx;   /* the parameter gradients are gg_dist_alloc's on this context (gg_case_run_dist_grads) */
} gg_case_run;

/* Per output: the comparison of the last gg_case_check. */
typedef struct gg_case_verdict {
    int passed; /* every output >= 99 % matched and no NaN/Inf */
    double worst_matched_ratio;
    double worst_ratio; /* the largest |err| / (atol + rtol |ref|) over all outputs */
    gg_h_compare_result result[GG_RUN_MAX_TENSORS];
} gg_case_verdict;

/* Fills run->in/out with the case's tensor descriptions (names, shapes, types) and allocates nothing; run->c must
 * be set and n_in/n_out zero. */
void gg_case_describe(gg_case_run *run);

/* Allocates everything for case c on the current device. Returns 0 or a cudaError_t (message in err). */
int gg_case_run_create(const gg_case *c, gg_stream stream, gg_case_run **out, char *err, size_t err_bytes);
/* The same with guard_bytes (a multiple of 256) of guard region before and after every output: the library must
 * never write them (gg_case_guards_fill, gg_case_guards_check). */
int gg_case_run_create_guarded(const gg_case *c, gg_stream stream, size_t guard_bytes, gg_case_run **out, char *err,
                               size_t err_bytes);
void gg_case_run_destroy(gg_case_run *run);

/* Fills every output's guard regions with GG_CASE_GUARD_BYTE (synchronously). Returns 0 or a cudaError_t. */
#define GG_CASE_GUARD_BYTE 0xA5
int gg_case_guards_fill(gg_case_run *run);
/* Counts the guard bytes that no longer hold GG_CASE_GUARD_BYTE, in *changed (0: untouched); the first output
 * with a changed guard is named in *tensor (NULL if none). Synchronizes. Returns 0 or a cudaError_t. */
int gg_case_guards_check(gg_case_run *run, size_t *changed, const char **tensor);

/* Moves the parameter gradients into gg_dist_alloc buffers of ctx (which copy engines all-reduce in place);
 * collective, like gg_dist_alloc. gg_case_run_destroy frees them with gg_dist_free: destroy the run before ctx, on
 * every rank. Returns a gg_status. */
int gg_case_run_dist_grads(gg_case_run *run, gg_ctx *ctx);

/* Draws fresh inputs (seed decides them) as the spec says, computes the float64 reference, poisons outputs. */
int gg_case_prepare(gg_case_run *run, uint64_t seed);
/* Poisons every output with NaN (before each library call). */
int gg_case_poison(gg_case_run *run);
/* Calls the library's entry point for the case's block (precision matters for blocks 2 and 3 only). */
gg_status gg_case_execute(gg_case_run *run, gg_ctx *ctx, gg_precision precision);
/* The same call through a graph: creating one for the case's block (desc from the case; config as given), running
 * it with the case's tensors (desc->tokens = the case's M), or running it device-selected (device_tokens holds M on
 * the device; the case's M is then the capacity). */
gg_status gg_case_graph_create(gg_case_run *run, gg_ctx *ctx, gg_precision precision, const gg_graph_config *config,
                               gg_graph **graph);
gg_status gg_case_graph_run(gg_case_run *run, gg_graph *graph, gg_precision precision);
gg_status gg_case_graph_run_device(gg_case_run *run, gg_graph *graph, gg_precision precision,
                                   const int64_t *device_tokens);

/* Copies every output to one host buffer (malloc'd, in output order); *bytes gets its size. */
void *gg_case_outputs_to_host(gg_case_run *run, size_t *bytes);
/* The reverse for the parameter gradients only: from a buffer of gg_case_outputs_to_host's layout back to the
 * device (the starting point of an accumulating call). Returns the first CUDA error, or cudaSuccess. */
int gg_case_params_to_device(gg_case_run *run, const void *outputs);

/* Compares every output against the reference with the case's tolerance (synchronizes). Returns 0 or error. */
int gg_case_check(gg_case_run *run, gg_case_verdict *verdict);

#endif
