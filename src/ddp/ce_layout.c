/* ce_layout.c - the pieces and shares of the copy-engine all-reduce (copy_engine.h): plain arithmetic, in every build
 * (tested on the CPU: tests/cpu/test_ce_layout.c). */
#include "copy_engine.h"

size_t gg_ce_share(size_t n, size_t at, int ranks, size_t piece_elems) {
    if (ranks < 1 || at >= n || n - at < (size_t)ranks) return 0;
    const size_t q = (n - at) / (size_t)ranks, most = piece_elems / (size_t)ranks; /* 0: the staging is too small */
    return q < most ? q : most;
}

size_t gg_ce_collectives(size_t n, int ranks, size_t piece_elems) {
    if (ranks < 1) return 0;
    const size_t r = (size_t)ranks, whole = piece_elems / r * r; /* the elements of a full piece */
    if (whole == 0) return n > 0; /* no piece holds one element per rank: all of it is the tail */
    const size_t full = n / whole, rest = n % whole;
    const size_t pieces = full + (rest >= r); /* the last, smaller piece takes rest / r per rank */
    const size_t tail = rest >= r ? rest % r : rest;
    return 2 * pieces + (tail > 0);
}
