/* held_call.c - held_call.h. */
#include "held_call.h"

#include <pthread.h>
#include <stdlib.h>

#include "block_calls.h"
#include "fake_cuda.h"

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int inside, release;
    gg_ctx *ctx;
    gg_status status;
    pthread_t thread;
} held = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, GG_SUCCESS, 0};

/* The fakes' hook: the first query (the held thread's) waits for the release; any later one passes. */
static void hold_inside(void) {
    pthread_mutex_lock(&held.lock);
    if (!held.inside) {
        held.inside = 1;
        pthread_cond_broadcast(&held.cond);
        while (!held.release) pthread_cond_wait(&held.cond, &held.lock);
    }
    pthread_mutex_unlock(&held.lock);
}

static void *call(void *arg) {
    (void)arg;
    const block_case c = {.block = 1, .tokens = 64, .dim0 = 256};
    held.status = block_call_run(held.ctx, NULL, &c, 0, 0);
    return NULL;
}

void held_call_begin(gg_ctx *ctx) {
    held.ctx = ctx;
    held.inside = held.release = 0;
    held.status = GG_SUCCESS;
    fake.on_is_capturing = hold_inside;
    if (pthread_create(&held.thread, NULL, call, NULL) != 0) abort();
    pthread_mutex_lock(&held.lock);
    while (!held.inside) pthread_cond_wait(&held.cond, &held.lock);
    pthread_mutex_unlock(&held.lock);
}

gg_status held_call_end(void) {
    pthread_mutex_lock(&held.lock);
    held.release = 1;
    pthread_cond_broadcast(&held.cond);
    pthread_mutex_unlock(&held.lock);
    if (pthread_join(held.thread, NULL) != 0) abort();
    fake.on_is_capturing = NULL;
    return held.status;
}
