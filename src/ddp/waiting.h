/*
 * waiting.h - how long gradgraph waits on the other ranks, and what it says while it waits: the deadlines, each from
 * its environment variable, and the progress notices of a bounded wait. Plain C (no NCCL), compiled in every build:
 * the file bootstrap waits for rank 0 before NCCL exists.
 */
#ifndef GG_WAITING_H
#define GG_WAITING_H

#include "internal.h"

/* The deadlines, each in whole seconds from its environment variable (1 to 86400; default 300): making a
 * communicator, rank 0's NCCL id included (GG_DIST_INIT_TIMEOUT_S), a collective step gradgraph waits for itself and
 * the end of a non-blocking NCCL call or of teardown (GG_DIST_PEER_TIMEOUT_S), a replay of a syncing graph
 * (GG_DIST_STEP_TIMEOUT_S, the watchdog's). Read when used, so a test may set them at any time. */
typedef enum gg_dist_timeout {
    GG_DIST_TIMEOUT_INIT,
    GG_DIST_TIMEOUT_PEER,
    GG_DIST_TIMEOUT_STEP,
    GG_DIST_TIMEOUTS
} gg_dist_timeout;
int gg_dist_timeout_s(gg_dist_timeout which);
const char *gg_dist_timeout_env(gg_dist_timeout which);
double gg_dist_now_s(void); /* a monotonic clock, in seconds */
void gg_dist_pause(void);   /* the pause between two polls */

/* The first progress notice of a wait comes after this many seconds (or half its limit, when that is shorter), the
 * next ones every GG_DIST_NOTICE_EVERY_S. */
#define GG_DIST_NOTICE_FIRST_S 10
#define GG_DIST_NOTICE_EVERY_S 30

/* A bounded wait on the other ranks. While it lasts, gg_dist_wait_over logs WARN lines through ctx's log callback
 * (see GG_DIST_NOTICE_FIRST_S), each naming the public call, the rank, what is awaited, how long it has waited and
 * when gradgraph gives up, so that a rank waiting for a dead or slow peer is not silent for the whole limit. */
typedef struct gg_dist_wait {
    const gg_ctx *ctx; /* whose log hears the notices (NULL: nobody's) */
    int rank;          /* this process's rank in the notices (-1: left out) */
    const char *what;  /* what is awaited: "the warm-up all-reduce", "ncclCommFinalize", ... */
    gg_dist_timeout which;
    int limit_s;
    double start;       /* gg_dist_now_s() when it began */
    double next_notice; /* the time waited, in seconds, at which the next notice is due */
} gg_dist_wait;

/* Starts w now, its limit read from `which`'s variable. */
void gg_dist_wait_begin(gg_dist_wait *w, const gg_ctx *ctx, int rank, const char *what, gg_dist_timeout which);

/* Moves w's start (and its notices) to `start`, a gg_dist_now_s() time: the watchdog's replays began at launch. */
void gg_dist_wait_since(gg_dist_wait *w, double start);

/* 1 once w has lasted its limit; else 0, after logging a notice when one is due. */
int gg_dist_wait_over(gg_dist_wait *w);

#endif
