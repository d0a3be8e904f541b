// The launch floor of the machine, in C++ with no Rust and no library in between: host time of
// one launch of a one-element kernel, through the runtime (`<<<>>>`) and the driver
// (`cuLaunchKernel`), synchronizing after each launch and back to back, plus the legacy default
// stream. Whatever a library's call costs, it costs at least this; `cupy_bench` and
// `driver_bench` measure the same floor from Rust in their own process.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/launch_floor tools/launch_floor.cu -lcuda && /tmp/launch_floor
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
__global__ void k1(const float* x, float* y, unsigned long long n) { if (threadIdx.x < n) y[threadIdx.x] = x[threadIdx.x]; }
static double now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size()/2]; }
int main() {
  float *x, *y; cudaMalloc(&x, 4); cudaMalloc(&y, 4);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  unsigned long long n = 1;
  CUfunction f; cudaGetFuncBySymbol((cudaFunction_t*)&f, (const void*)k1);
  CUstream cs = (CUstream)s;
  void* params[3] = {&x, &y, &n};
  for (int i = 0; i < 200; i++) { k1<<<1,256,0,s>>>(x,y,n); } cudaStreamSynchronize(s);
  std::vector<double> a, b, c, d;
  for (int i = 0; i < 3000; i++) {
    double t = now(); k1<<<1,256,0,s>>>(x,y,n); a.push_back(now()-t); cudaStreamSynchronize(s);
    t = now(); cuLaunchKernel(f,1,1,1,256,1,1,0,cs,params,nullptr); b.push_back(now()-t); cudaStreamSynchronize(s);
  }
  for (int r = 0; r < 20; r++) {
    double t = now(); for (int i = 0; i < 256; i++) k1<<<1,256,0,s>>>(x,y,n); c.push_back((now()-t)/256); cudaStreamSynchronize(s);
    t = now(); for (int i = 0; i < 256; i++) cuLaunchKernel(f,1,1,1,256,1,1,0,cs,params,nullptr); d.push_back((now()-t)/256); cudaStreamSynchronize(s);
  }
  // legacy default stream
  std::vector<double> e;
  for (int i = 0; i < 3000; i++) { double t = now(); k1<<<1,256>>>(x,y,n); e.push_back(now()-t); cudaDeviceSynchronize(); }
  printf("C++ launch floor (median us): runtime <<<>>> sync-after-each %.2f | cuLaunchKernel sync-after-each %.2f | runtime back-to-back %.2f | cuLaunchKernel back-to-back %.2f | legacy stream sync-after-each %.2f\n", med(a), med(b), med(c), med(d), med(e));
  return 0;
}
