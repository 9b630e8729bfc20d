/* waiting.c - the deadlines of waits on the other ranks, and the notices a long wait logs (waiting.h). */
#include "waiting.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const struct {
    const char *env;
    int default_s;
} timeouts[GG_DIST_TIMEOUTS] = {
    [GG_DIST_TIMEOUT_INIT] = {"GG_DIST_INIT_TIMEOUT_S", 300},
    [GG_DIST_TIMEOUT_PEER] = {"GG_DIST_PEER_TIMEOUT_S", 300},
    [GG_DIST_TIMEOUT_STEP] = {"GG_DIST_STEP_TIMEOUT_S", 300},
};

int gg_dist_timeout_s(gg_dist_timeout which) {
    const char *v = getenv(timeouts[which].env);
    const long s = v ? strtol(v, NULL, 10) : 0;
    return s >= 1 && s <= 86400 ? (int)s : timeouts[which].default_s;
}

const char *gg_dist_timeout_env(gg_dist_timeout which) { return timeouts[which].env; }

double gg_dist_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void gg_dist_pause(void) {
    const struct timespec pause = {0, 100000}; /* 0.1 ms: NCCL's own waits poll as often */
    nanosleep(&pause, NULL);
}

void gg_dist_wait_begin(gg_dist_wait *w, const gg_ctx *ctx, int rank, const char *what, gg_dist_timeout which) {
    w->ctx = ctx;
    w->rank = rank;
    w->what = what;
    w->which = which;
    w->limit_s = gg_dist_timeout_s(which);
    gg_dist_wait_since(w, gg_dist_now_s());
}

void gg_dist_wait_since(gg_dist_wait *w, double start) {
    const double first = GG_DIST_NOTICE_FIRST_S < w->limit_s / 2.0 ? GG_DIST_NOTICE_FIRST_S : w->limit_s / 2.0;
    w->start = start;
    w->next_notice = first;
}

int gg_dist_wait_over(gg_dist_wait *w) {
    const double now = gg_dist_now_s();
    if (now - w->start >= w->limit_s) return 1;
    if (now - w->start < w->next_notice) return 0;
    w->next_notice = now - w->start + GG_DIST_NOTICE_EVERY_S;
    if (!w->ctx) return 0;
    const char *entry = gg_ctx_entry(w->ctx); /* NULL on another thread than the one inside (the watchdog's) */
    char rank[32] = "", waited[32];
    if (w->rank >= 0) snprintf(rank, sizeof rank, "rank %d: ", w->rank);
    if (now - w->start < 10.0) snprintf(waited, sizeof waited, "%.1f", now - w->start); /* a short limit's */
    else snprintf(waited, sizeof waited, "%ld", (long)(now - w->start));
    gg_log(w->ctx, GG_LOG_WARN,
           "%s%s%s%s: not finished after %s s, waiting for the other ranks; gradgraph gives up at %d s (%s)",
           entry ? entry : "", entry ? ": " : "", rank, gg_after_entry(w->what, entry), waited, w->limit_s,
           gg_dist_timeout_env(w->which));
    return 0;
}
