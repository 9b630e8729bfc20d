// sigmoid_probe.cu - lab: how often block 4's fast sigmoid (ssm_chain.cuh's fast_sigmoid) gives a different bf16
// s = bf16(sigmoid(gate)) than the exactly rounded sigmoid, over every finite bf16 gate value, and weighted by the
// test data's N(0,1) gates. The accurate fp32 form (1 / (1 + expf(-z)), the chain's until session 24) for comparison.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o /tmp/sigmoid_probe \
//     scripts/lab/sigmoid_probe.cu && /tmp/sigmoid_probe
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cuda_bf16.h>

#include "ssm_chain.cuh"

__global__ void sigmoids(unsigned short *fast, unsigned short *accurate) {
    const unsigned bits = blockIdx.x * blockDim.x + threadIdx.x;
    if (bits > 0xffffu) return;
    const float z = __uint_as_float(bits << 16);
    const __nv_bfloat16 f = __float2bfloat16_rn(gg::fast_sigmoid(z));
    const __nv_bfloat16 a = __float2bfloat16_rn(1.0f / (1.0f + expf(-z)));
    fast[bits] = *reinterpret_cast<const unsigned short *>(&f);
    accurate[bits] = *reinterpret_cast<const unsigned short *>(&a);
}

static unsigned short bf16_of(double x) { // round to nearest even through fp32 (exact for doubles near a bf16 value)
    const float f = (float)x; // the double sigmoid rounded to fp32 first: ties at bf16 are measure-zero here
    unsigned u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

int main() {
    unsigned short *d_fast, *d_acc, fast[65536], acc[65536];
    cudaMalloc(&d_fast, sizeof fast);
    cudaMalloc(&d_acc, sizeof acc);
    sigmoids<<<256, 256>>>(d_fast, d_acc);
    cudaMemcpy(fast, d_fast, sizeof fast, cudaMemcpyDeviceToHost);
    cudaMemcpy(acc, d_acc, sizeof acc, cudaMemcpyDeviceToHost);
    if (cudaGetLastError() != cudaSuccess) return 1;
    int finite = 0, fast_off = 0, acc_off = 0;
    double w_fast = 0, w_acc = 0, w_all = 0;
    for (unsigned bits = 0; bits < 65536; ++bits) {
        const unsigned u = bits << 16;
        float z;
        memcpy(&z, &u, 4);
        if (!std::isfinite(z)) continue;
        ++finite;
        const unsigned short exact = bf16_of(1.0 / (1.0 + std::exp(-(double)z)));
        if (fast[bits] != exact) printf("fast off at gate %.9g: 0x%04x, exact 0x%04x\n", z, fast[bits], exact);
        if (acc[bits] != exact) printf("accurate off at gate %.9g: 0x%04x, exact 0x%04x\n", z, acc[bits], exact);
        // the probability mass of N(0,1) rounding to this bf16 value: density times the value's spacing (ulp)
        const unsigned un = u + 0x10000u;
        float znext;
        memcpy(&znext, &un, 4);
        const double w = std::isfinite(znext) ? std::exp(-0.5 * (double)z * z) / std::sqrt(2 * M_PI) *
                                                    std::fabs((double)znext - z)
                                              : 0.0;
        w_all += w;
        if (fast[bits] != exact) ++fast_off, w_fast += w;
        if (acc[bits] != exact) ++acc_off, w_acc += w;
    }
    printf("finite bf16 gates: %d\n", finite);
    printf("fast sigmoid: %d values with s off the exact bf16; N(0,1)-weighted fraction of elements %.3g\n", fast_off,
           w_fast / w_all);
    printf("accurate fp32 sigmoid: %d values off; N(0,1)-weighted fraction %.3g\n", acc_off, w_acc / w_all);
    return 0;
}
