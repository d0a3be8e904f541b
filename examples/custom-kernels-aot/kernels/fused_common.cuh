// fused_common.cuh — the pre-activation shared by the forward and backward kernels.
// (A header, so that a change to it alone shows cuda-stack-build's header tracking: cargo reruns the
// build script when it changes.)
#pragma once

// x * scale + bias, rounded once (fmaf), as the CPU reference computes it (f32::mul_add).
__device__ __forceinline__ float fused_pre(float x, float scale, float bias) {
    return fmaf(x, scale, bias);
}
