/* probe_lt.h - the lab probes' cuBLASLt heuristic query: the first `max_n` candidates for a GEMM whose descriptor
 * and layouts the probe made, within `ws_max` bytes of workspace. */
#ifndef GG_LAB_PROBE_LT_H
#define GG_LAB_PROBE_LT_H

#include <cstdint>
#include <vector>

#include <cublasLt.h>

#include "probe_check.h"

static std::vector<cublasLtMatmulHeuristicResult_t> lt_candidates(cublasLtHandle_t lt, cublasLtMatmulDesc_t op,
                                                                  cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                                  cublasLtMatrixLayout_t d, uint64_t ws_max,
                                                                  int max_n) {
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof ws_max));
    std::vector<cublasLtMatmulHeuristicResult_t> r((size_t)max_n);
    int found = 0;
    LK(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, max_n, r.data(), &found));
    LK(cublasLtMatmulPreferenceDestroy(pref));
    r.resize((size_t)found);
    return r;
}

#endif
