// custom_kernels.cu — seed 004's fused operation, relu(input * scale + bias), forward and
// backward. `input` is a [rows, cols] row-major matrix; `bias` has one value per column.
// Every kernel is extern "C" (unmangled names: cuda-stack-build gives each a typed handle) and
// correct for any grid (grid-stride loops), any size including 0.
#include "fused_common.cuh"

// output[r, c] = max(input[r, c] * scale + bias[c], 0)
extern "C" __global__ void fused_op_forward(const float* __restrict__ input,
                                            const float* __restrict__ bias, float scale,
                                            float* __restrict__ output, int rows, int cols) {
    const long long n = (long long)rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float pre = fused_pre(input[i], scale, bias[i % cols]);
        output[i] = pre > 0.0f ? pre : 0.0f;
    }
}

// grad_input[r, c] = (input[r, c] * scale + bias[c] > 0) ? grad_output[r, c] * scale : 0
extern "C" __global__ void fused_op_backward_input(const float* __restrict__ grad_output,
                                                   const float* __restrict__ input,
                                                   const float* __restrict__ bias, float scale,
                                                   float* __restrict__ grad_input, int rows,
                                                   int cols) {
    const long long n = (long long)rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float pre = fused_pre(input[i], scale, bias[i % cols]);
        grad_input[i] = pre > 0.0f ? grad_output[i] * scale : 0.0f;
    }
}

// grad_bias[c] = sum over r of (input[r, c] * scale + bias[c] > 0) ? grad_output[r, c] : 0
// One thread per column, rows summed in order (deterministic; neighbouring threads read
// neighbouring columns, so each row's loads are coalesced).
extern "C" __global__ void fused_op_backward_bias(const float* __restrict__ grad_output,
                                                  const float* __restrict__ input,
                                                  const float* __restrict__ bias, float scale,
                                                  float* __restrict__ grad_bias, int rows,
                                                  int cols) {
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < cols;
         c += (long long)gridDim.x * blockDim.x) {
        const float b = bias[c];
        float acc = 0.0f;
        for (long long r = 0; r < rows; ++r) {
            const long long i = r * cols + c;
            acc += fused_pre(input[i], scale, b) > 0.0f ? grad_output[i] : 0.0f;
        }
        grad_bias[c] = acc;
    }
}
