/*
 * fake_order.h - the order a logged capture (fake_log) puts its work in, and the data races it leaves. Happens-before
 * is program order on each stream plus an event's record before each wait on it (the last record of that event
 * logged before the wait); the operations are the log's kernels, GEMMs, copies, memsets and collectives. A race is
 * two operations that touch the same bytes, at least one of them writing (not atomically), neither happening before the
 * other. What each operation touches is what fake_log saw: a kernel only at its pointer arguments (the first byte;
 * written unless it points to const; an unsigned int * updated atomically), a GEMM its operands' and workspace's
 * extents, a collective its buffers. The words a kernel's class arguments hold (ChainArgs, LoadRow, ...) are not
 * used: the fake's scan of them reads on into the launching frame, whose stale words would make races up.
 */
#ifndef GG_FAKE_ORDER_H
#define GG_FAKE_ORDER_H

typedef struct fake_races {
    int ops;         /* operations in the log */
    int collectives; /* ... of them collectives */
    int pairs;       /* pairs that touch the same bytes with a write (ordered or not): what the check covered */
    int races;       /* ... of them unordered */
} fake_races;

/* Checks the current fake_log (which must not be truncated). only_collectives: only pairs with a collective on one
 * side count. The first `loud` races are printed (their kernels' names, streams and log entries; with GG_RACE_DUMP
 * set, the whole log after each: every entry's stream, event and ranges, r/w/a/? for read, written, atomic, a class
 * argument's word). A test
 * must give the fakes real device ranges (fake.device_space), else a GEMM's extent from a small fake allocation
 * covers unrelated host addresses. */
fake_races fake_check_races(int only_collectives, int loud);

/* Whether log entry a happens before log entry b (both operations of the current fake_log, a != b): 1 if it does, 0
 * if not (b before a, or neither), -1 if either is not an operation or the log cannot be ordered. */
int fake_happens_before(int a, int b);

#endif
