/* probe_check.h - the lab probes' CUDA runtime check: print the failing call and exit. */
#ifndef GG_LAB_PROBE_CHECK_H
#define GG_LAB_PROBE_CHECK_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(x)                                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                     \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

#endif
