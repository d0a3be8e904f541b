/* A stand-in libcuda for measuring the host side of a call on a machine with no GPU.
 *
 * Every entry point the crates use on a launch path answers at once with success and plausible
 * values (an H100-like device: sm_90, 132 SMs); nothing runs and device memory is a bump
 * pointer. Load it with CUDA_DRIVER_PATH=.../libcuda_stub.so and run a program under callgrind
 * (tools/host-profile/run): the instruction counts are then those of our code alone, which is
 * what the cuda-stack-jit per-call overhead is made of. Entry points not defined here are missing
 * symbols (the loader reports them as such when called). cuFuncGetParamInfo is one of them on
 * purpose: the crates then read parameter sizes from the PTX, which they always have here, as the
 * device reports compute capability 9.1 (an architecture NVRTC makes no cubin for, so cuda-stack-jit
 * compiles PTX). Not a driver: never for correctness. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUstream, *CUevent, *CUmodule, *CUfunction, *CUmemoryPool;
typedef unsigned long long CUdeviceptr;

static char handles[4096];
static int next_handle = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *new_handle(void) {
  pthread_mutex_lock(&mu);
  void *h = &handles[(next_handle++) % 4096];
  pthread_mutex_unlock(&mu);
  return h;
}
static CUdeviceptr next_ptr = 0x7f0000000000ULL;
static CUdeviceptr bump(size_t n) {
  pthread_mutex_lock(&mu);
  CUdeviceptr p = next_ptr;
  next_ptr += (n + 511) & ~(size_t)511;
  pthread_mutex_unlock(&mu);
  return p;
}
static char the_ctx;
static __thread CUcontext current = 0;

CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice *d, int o) { if (o != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char *s, int len, CUdevice d) { (void)d; strncpy(s, "Stub GPU (no device)", len); return 0; }
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { (void)d; *b = 80ULL << 30; return 0; }
CUresult cuDeviceGetUuid_v2(void *u, CUdevice d) { (void)d; memset(u, 0, 16); return 0; }
CUresult cuDeviceCanAccessPeer(int *c, CUdevice a, CUdevice b) { (void)a; (void)b; *c = 0; return 0; }
CUresult cuDeviceGetAttribute(int *v, int a, CUdevice d) {
  (void)d;
  switch (a) {
  case 1: case 2: *v = 1024; break;
  case 3: *v = 1024; break;
  case 4: *v = 64; break;
  case 5: *v = 2147483647; break;
  case 6: case 7: *v = 65535; break;
  case 8: *v = 49152; break;
  case 10: *v = 32; break;
  case 12: case 82: *v = 65536; break;
  case 16: *v = 132; break;
  case 39: *v = 2048; break;
  case 75: *v = 9; break;
  case 76: *v = 1; break; /* 9.1: NVRTC has no cubin for it, so cuda-stack-jit loads PTX */
  case 81: *v = 233472; break;
  case 97: *v = 232448; break;
  case 106: *v = 32; break;
  case 38: *v = 52428800; break;
  default: *v = 1; break;
  }
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = &the_ctx; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return 0; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return 0; }
CUresult cuCtxPushCurrent_v2(CUcontext c) { current = c; return 0; }
CUresult cuCtxPopCurrent_v2(CUcontext *c) { if (c) *c = current; return 0; }
CUresult cuCtxGetDevice(CUdevice *d) { *d = 0; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuCtxGetStreamPriorityRange(int *lo, int *hi) { *lo = 0; *hi = -5; return 0; }
CUresult cuCtxSetLimit(int l, size_t v) { (void)l; (void)v; return 0; }
CUresult cuCtxGetLimit(size_t *v, int l) { (void)l; *v = 1024; return 0; }
CUresult cuStreamCreateWithPriority(CUstream *s, unsigned f, int p) { (void)f; (void)p; *s = new_handle(); return 0; }
CUresult cuStreamDestroy_v2(CUstream s) { (void)s; return 0; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return 0; }
CUresult cuStreamQuery(CUstream s) { (void)s; return 0; }
CUresult cuStreamIsCapturing(CUstream s, int *st) { (void)s; *st = 0; return 0; }
CUresult cuStreamGetCtx(CUstream s, CUcontext *c) { (void)s; *c = &the_ctx; return 0; }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) { (void)s; (void)e; (void)f; return 0; }
CUresult cuEventCreate(CUevent *e, unsigned f) { (void)f; *e = new_handle(); return 0; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return 0; }
CUresult cuEventDestroy_v2(CUevent e) { (void)e; return 0; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return 0; }
CUresult cuEventQuery(CUevent e) { (void)e; return 0; }
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0.001f; return 0; }
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice d) { (void)d; *p = new_handle(); return 0; }
CUresult cuMemPoolSetAttribute(CUmemoryPool p, int a, void *v) { (void)p; (void)a; (void)v; return 0; }
CUresult cuMemPoolGetAttribute(CUmemoryPool p, int a, void *v) { (void)p; (void)a; memset(v, 0, 8); return 0; }
CUresult cuMemPoolSetAccess(CUmemoryPool p, const void *m, size_t n) { (void)p; (void)m; (void)n; return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = bump(n); return 0; }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { (void)s; *p = bump(n); return 0; }
CUresult cuMemFree_v2(CUdeviceptr p) { (void)p; return 0; }
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)p; (void)s; return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 79ULL << 30; *t = 80ULL << 30; return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) { (void)d; (void)h; (void)n; (void)s; return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) { (void)d; (void)s; memset(h, 0, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr a, CUdeviceptr b, size_t n, CUstream s) { (void)a; (void)b; (void)n; (void)s; return 0; }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { (void)d; (void)v; (void)n; (void)s; return 0; }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) { (void)f; *p = malloc(n ? n : 1); return *p ? 0 : 2; }
CUresult cuMemFreeHost(void *p) { free(p); return 0; }
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned f) { (void)p; (void)n; (void)f; return 0; }
CUresult cuMemHostUnregister(void *p) { (void)p; return 0; }
CUresult cuModuleLoadDataEx(CUmodule *m, const void *img, unsigned n, void *o, void **v) { (void)img; (void)n; (void)o; (void)v; *m = new_handle(); return 0; }
CUresult cuModuleUnload(CUmodule m) { (void)m; return 0; }
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) { (void)m; (void)name; *f = new_handle(); return 0; }
CUresult cuFuncGetAttribute(int *v, int a, CUfunction f) {
  (void)f;
  switch (a) {
  case 0: *v = 1024; break; /* max threads per block */
  case 4: *v = 32; break;   /* registers */
  case 5: *v = 90; break;   /* PTX version */
  case 6: *v = 90; break;   /* binary version */
  default: *v = 0; break;
  }
  return 0;
}
CUresult cuFuncSetAttribute(CUfunction f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int b, size_t s) { (void)f; (void)b; (void)s; *n = 8; return 0; }
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned sm, CUstream s, void **p, void **e) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sm; (void)s; (void)p; (void)e;
  return 0;
}
typedef void (*HostFn)(void *);
struct host_call { HostFn fn; void *data; };
static void *run_host_fn(void *a) { struct host_call c = *(struct host_call *)a; free(a); c.fn(c.data); return 0; }
CUresult cuLaunchHostFunc(CUstream s, HostFn fn, void *data) {
  (void)s;
  struct host_call *c = malloc(sizeof *c);
  pthread_t t;
  c->fn = fn; c->data = data;
  if (pthread_create(&t, 0, run_host_fn, c)) return 2;
  pthread_detach(t);
  return 0;
}
