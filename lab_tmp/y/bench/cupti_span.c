/* cupti_span.c - kernel spans from CUPTI's activity API (see cupti_span.h). */
#include "cupti_span.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#define BUFFER_BYTES (8u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t first_start = UINT64_MAX, last_end = 0;
static int recording;
static struct {
    uint64_t start, end;
    unsigned device, stream;
    unsigned ctas, threads, cluster[3];
    char name[96];
} kernels[GG_SPAN_MAX_KERNELS];
static int n_kernels;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)context, (void)stream, (void)size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !recording) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
        if (k->start < first_start) first_start = k->start;
        if (k->end > last_end) last_end = k->end;
        if (n_kernels < GG_SPAN_MAX_KERNELS) {
            kernels[n_kernels].start = k->start;
            kernels[n_kernels].end = k->end;
            kernels[n_kernels].stream = k->streamId;
            kernels[n_kernels].device = k->deviceId;
            kernels[n_kernels].ctas = (unsigned)(k->gridX * k->gridY * k->gridZ);
            kernels[n_kernels].threads = (unsigned)(k->blockX * k->blockY * k->blockZ);
            kernels[n_kernels].cluster[0] = k->clusterX;
            kernels[n_kernels].cluster[1] = k->clusterY;
            kernels[n_kernels].cluster[2] = k->clusterZ;
            snprintf(kernels[n_kernels].name, sizeof kernels[n_kernels].name, "%s", k->name ? k->name : "?");
            ++n_kernels;
        }
    }
    pthread_mutex_unlock(&lock);
    free(buffer);
}

int gg_span_init(void) {
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); /* checks it works */
    if (r == CUPTI_SUCCESS) r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        const char *name = NULL;
        cuptiGetResultString(r, &name);
        fprintf(stderr, "cupti: %s: kernel spans unavailable\n", name ? name : "error");
        return -1;
    }
    return 0;
}

void gg_span_enable(int on) {
    if (on)
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    else
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(1);
}

void gg_span_begin(void) {
    cuptiActivityFlushAll(1); /* deliver (and drop) whatever ran before */
    pthread_mutex_lock(&lock);
    first_start = UINT64_MAX;
    last_end = 0;
    n_kernels = 0;
    recording = 1;
    pthread_mutex_unlock(&lock);
}

double gg_span_end(void) {
    cuptiActivityFlushAll(1);
    pthread_mutex_lock(&lock);
    const double us = last_end > first_start ? (double)(last_end - first_start) / 1000.0 : -1.0;
    recording = 0;
    pthread_mutex_unlock(&lock);
    return us;
}

void gg_span_shutdown(void) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(1);
}

static int by_start(const void *a, const void *b) {
    const gg_span_kernel *x = a, *y = b;
    return (x->start_us > y->start_us) - (x->start_us < y->start_us);
}

int gg_span_kernels(gg_span_kernel *out, int max) {
    pthread_mutex_lock(&lock);
    const int n = n_kernels < max ? n_kernels : max;
    for (int i = 0; i < n; ++i) {
        memcpy(out[i].name, kernels[i].name, sizeof out[i].name);
        out[i].stream = kernels[i].stream;
        out[i].device = kernels[i].device;
        out[i].ctas = kernels[i].ctas;
        out[i].threads = kernels[i].threads;
        memcpy(out[i].cluster, kernels[i].cluster, sizeof out[i].cluster);
        out[i].start_us = (double)(kernels[i].start - first_start) / 1000.0;
        out[i].duration_us = (double)(kernels[i].end - kernels[i].start) / 1000.0;
    }
    pthread_mutex_unlock(&lock);
    qsort(out, (size_t)n, sizeof *out, by_start);
    return n;
}
