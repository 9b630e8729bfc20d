/* ce_layout.c - the pieces and shares of the copy-engine all-reduce (copy_engine.h): plain arithmetic, in every build
 * (tested on the CPU: tests/cpu/test_ce_layout.c). */
#include "copy_engine.h"

size_t gg_ce_share(size_t n, size_t at, int ranks, size_t piece_elems) {
    if (ranks < 1 || at >= n || n - at < (size_t)ranks) return 0;
    const size_t q = (n - at) / (size_t)ranks, most = piece_elems / (size_t)ranks; /* 0: the staging is too small */
    return q < most ? q : most;
}
