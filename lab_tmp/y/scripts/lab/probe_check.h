/* probe_check.h - the lab probes' checks of CUDA runtime (CK) and cuBLASLt (LK) calls: print the failing call and
 * exit. */
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

/* For probes that include cublasLt.h. */
#define LK(x)                                                                                                      \
    do {                                                                                                           \
        cublasStatus_t s_ = (x);                                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                         \
            fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);                             \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

#endif
