extern "C" __global__ void add1(float* x, unsigned n) { unsigned i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) x[i] += 1.0f; }
