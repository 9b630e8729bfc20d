/* fake_order.c - happens-before over fake_log and the races it leaves (fake_order.h). */
#include "fake_order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_alloc.h"

enum { MAX_STREAMS = 32 };

/* One operation with its vector clock: per stream, how many of that stream's operations happen before it or are it. */
typedef struct clocked {
    int entry, stream;
    int clock[MAX_STREAMS];
} clocked;

static int is_operation(fake_op op) {
    return op == FAKE_OP_KERNEL || op == FAKE_OP_MATMUL || op == FAKE_OP_MEMSET || op == FAKE_OP_MEMCPY ||
           op == FAKE_OP_COLLECTIVE;
}

/* The log's operations with their clocks, in enqueue order; returns how many (-1: more streams than it can tell). */
static int clock_ops(clocked *ops) {
    cudaStream_t streams[MAX_STREAMS];
    int n_streams = 0, n = 0, n_records = 0;
    int clock[MAX_STREAMS][MAX_STREAMS] = {{0}};
    struct record {
        cudaEvent_t event;
        int clock[MAX_STREAMS];
    } *records = calloc((size_t)fake_log.n + 1, sizeof *records);
    for (int i = 0; i < fake_log.n && records; ++i) {
        const fake_entry *e = &fake_log.entries[i];
        if (e->op == FAKE_OP_MARK || e->op == FAKE_OP_GRAPH) continue;
        int s = 0;
        while (s < n_streams && streams[s] != e->stream) ++s;
        if (s == n_streams) {
            if (n_streams == MAX_STREAMS) {
                free(records);
                return -1;
            }
            streams[n_streams++] = e->stream;
        }
        if (e->op == FAKE_OP_WAIT) {
            int r = n_records - 1;
            while (r >= 0 && records[r].event != e->event) --r;
            for (int t = 0; r >= 0 && t < MAX_STREAMS; ++t)
                if (records[r].clock[t] > clock[s][t]) clock[s][t] = records[r].clock[t];
            continue;
        }
        clock[s][s]++;
        if (e->op == FAKE_OP_RECORD) {
            records[n_records].event = e->event;
            memcpy(records[n_records++].clock, clock[s], sizeof clock[s]);
        } else if (is_operation(e->op)) {
            ops[n] = (clocked){.entry = i, .stream = s};
            memcpy(ops[n++].clock, clock[s], sizeof clock[s]);
        }
    }
    free(records);
    return n;
}

/* Whether operation a happens before operation b (their clocks from one clock_ops). */
static int before(const clocked *a, const clocked *b) { return a->clock[a->stream] <= b->clock[a->stream]; }

/* Whether a and b touch a byte in common that at least one of them writes (not atomically). A word read from a
 * kernel's class argument counts for neither: the scan runs past the argument into whatever the frame holds. */
static int conflict(const fake_entry *a, const fake_entry *b) {
    for (int i = 0; i < a->n_ranges; ++i)
        for (int j = 0; j < b->n_ranges; ++j)
            if (a->ranges[i].writes != FAKE_MAYBE && b->ranges[j].writes != FAKE_MAYBE &&
                (a->ranges[i].writes == FAKE_WRITES || b->ranges[j].writes == FAKE_WRITES) &&
                a->ranges[i].lo < b->ranges[j].hi && b->ranges[j].lo < a->ranges[i].hi)
                return 1;
    return 0;
}

static const char *what(const fake_entry *e) {
    if (e->op == FAKE_OP_KERNEL) return e->kernel ? e->kernel : "a kernel";
    return e->op == FAKE_OP_MATMUL ? "a GEMM" : e->op == FAKE_OP_COLLECTIVE ? "a collective" : "a copy or memset";
}

fake_races fake_check_races(int only_collectives, int loud) {
    fake_races r = {0, 0, 0, 0};
    clocked *ops = calloc((size_t)fake_log.n + 1, sizeof *ops);
    const int n = ops ? clock_ops(ops) : -1;
    if (n < 0) {
        fprintf(stderr, "fake_check_races: cannot order the log\n");
        free(ops);
        r.races = -1;
        return r;
    }
    r.ops = n;
    for (int a = 0; a < n; ++a) {
        const fake_entry *ea = &fake_log.entries[ops[a].entry];
        r.collectives += ea->op == FAKE_OP_COLLECTIVE;
        for (int b = a + 1; b < n; ++b) {
            const fake_entry *eb = &fake_log.entries[ops[b].entry];
            if (only_collectives && ea->op != FAKE_OP_COLLECTIVE && eb->op != FAKE_OP_COLLECTIVE) continue;
            if (!conflict(ea, eb)) continue;
            ++r.pairs;
            if (before(&ops[a], &ops[b])) continue;
            if (++r.races <= loud) {
                printf("race: %s (entry %d, stream %d) and %s (entry %d, stream %d) touch the same bytes unordered\n",
                       what(ea), ops[a].entry, ops[a].stream, what(eb), ops[b].entry, ops[b].stream);
                if (getenv("GG_RACE_DUMP"))
                    for (int i = 0; i < fake_log.n; ++i) {
                        const fake_entry *e = &fake_log.entries[i];
                        printf("  %d op %d stream %p event %p:", i, (int)e->op, (void *)e->stream, (void *)e->event);
                        for (int k = 0; k < e->n_ranges; ++k)
                            printf(" [%#lx,+%lu)%c", (unsigned long)e->ranges[k].lo,
                                   (unsigned long)(e->ranges[k].hi - e->ranges[k].lo), "rwa?"[e->ranges[k].writes]);
                        printf(" %s\n", e->op == FAKE_OP_KERNEL ? what(e) : "");
                    }
            }
        }
    }
    free(ops);
    return r;
}

int fake_happens_before(int a, int b) {
    clocked *ops = calloc((size_t)fake_log.n + 1, sizeof *ops);
    const int n = ops ? clock_ops(ops) : -1;
    const clocked *oa = NULL, *ob = NULL;
    for (int i = 0; i < n; ++i) {
        if (ops[i].entry == a) oa = &ops[i];
        if (ops[i].entry == b) ob = &ops[i];
    }
    const int ordered = oa && ob && a != b ? before(oa, ob) : -1;
    free(ops);
    return ordered;
}
