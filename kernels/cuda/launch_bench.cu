// launch_bench.cu — kernels that do (almost) nothing, to measure launch overhead.
//
// empty_kernel: no parameters, no work: the time is pure launch + scheduling cost.
// four_args: four parameters like a typical small kernel, and a branch that is never taken for
//   real inputs (n == 0xffffffff), so the compiler cannot delete the parameter loads.
// Launch: any grid and block (e.g. 1 x 1 for latency, or many blocks for throughput).

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void four_args(float* a, const float* b, float s, unsigned int n) {
    if (n == 0xffffffffu) a[0] = b[0] * s;
}
