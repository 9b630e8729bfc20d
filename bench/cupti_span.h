/*
 * cupti_span.h - the published timing protocol's measure: per iteration, the GPU span from the first kernel's start
 * to the last kernel's end, on any stream, read from CUPTI's activity records (kernels only: the cold-L2 memset
 * between iterations is not a kernel and is not counted).
 */
#ifndef GG_CUPTI_SPAN_H
#define GG_CUPTI_SPAN_H

/* Sets CUPTI up (tracing stays off until gg_span_enable). Returns 0, or -1 with a message on stderr. */
int gg_span_init(void);
/* Turns kernel tracing on or off. Tracing delays every launch: never time with events while it is on. */
void gg_span_enable(int on);
/* Forgets what was recorded so far: the next span starts here. Call after the work before the iteration is done. */
void gg_span_begin(void);
/* The span, in microseconds, of the kernels that ran since gg_span_begin (call after synchronizing); -1 if none. */
double gg_span_end(void);
void gg_span_shutdown(void);

/* The kernels of the last span (after gg_span_end), in start order: the bench's --trace output. */
typedef struct gg_span_kernel {
    char name[96];     /* the (mangled) kernel name, truncated */
    unsigned device;   /* CUDA device ordinal */
    unsigned stream;   /* CUPTI's stream id */
    unsigned ctas;     /* the launch's grid, in CTAs */
    unsigned threads;  /* threads per CTA */
    unsigned cluster[3]; /* the thread-block cluster's shape as launched (x, y, z; 0 0 0 or 1 1 1: no cluster) */
    double start_us;   /* from the span's first kernel start */
    double duration_us;
} gg_span_kernel;
#define GG_SPAN_MAX_KERNELS 1024 /* a step graph of a few dozen layers */
/* Copies up to max kernels into out and returns how many were recorded (at most GG_SPAN_MAX_KERNELS). */
int gg_span_kernels(gg_span_kernel *out, int max);

#endif
