// emu.h — a CPU emulator of one CTA at a time for the mma.sync attention kernels (run.sh): each
// CUDA thread is a ucontext fiber; warp-collective instructions (ldmatrix .x4 and .x4.trans,
// mma.sync m16n8k16 bf16/f16 -> f32, shfl.xor) and __syncthreads rendezvous in a round-robin
// scheduler (a round without progress is reported as a deadlock; lanes of a warp that disagree
// on the collective are an error). Fragment layouts as the PTX ISA gives them. Shared memory is
// addressed through smem_u32 (region << 20 | offset, bounds-checked) and shadowed byte by byte:
// two threads touching a byte between the same two barriers (unless both read), and any access
// to a byte a cp.async is still in flight to (issued, its group not yet waited for by
// cp.async.wait_group), are errors. Shared arrays the kernel indexes directly (the lse / delta
// staging) are not shadowed. Shared memory starts every block as 0xff bytes (NaN in f16/bf16).
#pragma once
#include <cmath>
#include <cstdarg>
#include <memory>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

// ---- CUDA spellings -------------------------------------------------------------------------
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

typedef unsigned short f16_t;
typedef unsigned short bf16_t;
struct float4 {
    float x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};

struct emu_dim3 {
    unsigned x, y, z;
};

namespace emu {

[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "EMU ERROR: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    _exit(2);
}

constexpr int THREADS = 128;

struct Pending {
    int group;  // the commit group it belongs to (the thread's count of commits at issue)
    unsigned dst;
    unsigned char data[16];
};

struct Fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    emu_dim3 tid;
    bool done = false;
    std::vector<Pending> pending;  // cp.async copies issued, not yet waited for
    int committed = 0;             // cp.async.commit_group count
};

// Warp-collective rendezvous slots.
enum Kind { LDSM, LDSM_T, MMA_BF16, MMA_F16, SHFL_XOR };
struct Slot {
    Kind kind;
    unsigned addr;
    unsigned a[4], b[2];
    float c[4];
    unsigned out[4];
    float d[4];
    unsigned mask, lanemask;  // shfl
    float val;
};
struct Warp {
    Slot slot[32];
    int arrived = 0;
    unsigned long gen = 0;
};

struct Region {
    unsigned char* p;
    size_t size;
};
struct Shadow {
    long w_epoch = -1, r_epoch = -1;
    int w_tid = -1, r_tid = -1;  // r_tid -2: several readers
    int pending = -1;
};

struct State {
    Fiber fib[THREADS];
    Fiber* cur = nullptr;
    ucontext_t sched;
    Warp warp[THREADS / 32];
    int bar_arrived = 0;
    unsigned long bar_gen = 0;
    long epoch = 0;
    unsigned long progress = 0;
    std::vector<Region> regions;
    std::vector<std::vector<Shadow>> shadow;
    unsigned long n_mma = 0, n_ldsm = 0, n_bar = 0, n_red = 0;
};
inline State& st() {
    static State s;
    return s;
}
inline emu_dim3 block_idx, grid_dim, block_dim{THREADS, 1, 1};

inline int tid() { return (int)st().cur->tid.x; }
inline void yield() { swapcontext(&st().cur->ctx, &st().sched); }

// ---- shared memory ----------------------------------------------------------------------------
inline unsigned smem_register(const void* p, size_t size) {
    State& s = st();
    for (size_t i = 0; i < s.regions.size(); ++i)
        if (s.regions[i].p == p) return (unsigned)(i + 1) << 20;
    if (size >= (1u << 20)) fail("shared region too large");
    s.regions.push_back({(unsigned char*)p, size});
    s.shadow.emplace_back(size);
    return (unsigned)s.regions.size() << 20;
}
inline unsigned char* smem_at(unsigned addr, size_t len, Shadow** sh) {
    State& s = st();
    const unsigned r = addr >> 20, off = addr & 0xfffff;
    if (r == 0 || r > s.regions.size()) fail("shared address 0x%x: no region", addr);
    const Region& reg = s.regions[r - 1];
    if (off + len > reg.size) fail("shared address 0x%x + %zu: past the region's %zu bytes", addr, len, reg.size);
    if (off % 16 && len == 16) fail("shared address 0x%x: 16-byte access misaligned", addr);
    *sh = &s.shadow[r - 1][off];
    return reg.p + off;
}
inline void check_read(unsigned addr, size_t len, int t) {
    Shadow* sh;
    smem_at(addr, len, &sh);
    const long e = st().epoch;
    for (size_t i = 0; i < len; ++i) {
        Shadow& x = sh[i];
        if (x.pending >= 0) fail("thread %d reads shared 0x%zx while a cp.async of thread %d to it is in flight", t, addr + i, x.pending);
        if (x.w_epoch == e && x.w_tid != t) fail("race: thread %d reads shared 0x%zx written by thread %d in the same barrier interval", t, addr + i, x.w_tid);
        if (x.r_epoch == e && x.r_tid != t) x.r_tid = -2;
        else { x.r_epoch = e; x.r_tid = t; }
    }
}
inline void check_write(unsigned addr, size_t len, int t, bool async_issue) {
    Shadow* sh;
    smem_at(addr, len, &sh);
    const long e = st().epoch;
    for (size_t i = 0; i < len; ++i) {
        Shadow& x = sh[i];
        if (x.pending >= 0 && !(async_issue == false && x.pending == t))
            fail("thread %d writes shared 0x%zx while a cp.async of thread %d to it is in flight", t, addr + i, x.pending);
        if (x.w_epoch == e && x.w_tid != t) fail("race: thread %d writes shared 0x%zx written by thread %d in the same interval", t, addr + i, x.w_tid);
        if (x.r_epoch == e && x.r_tid != t) fail("race: thread %d writes shared 0x%zx read by thread %d in the same interval", t, addr + i, x.r_tid);
    }
}

// cp.async.cg 16 bytes, src_bytes of them from global (the rest zero).
inline void cp16(unsigned dst, const void* src, int bytes) {
    const int t = tid();
    check_write(dst, 16, t, true);
    Pending p;
    p.group = st().cur->committed;
    p.dst = dst;
    std::memset(p.data, 0, 16);
    if (bytes) std::memcpy(p.data, src, bytes);  // global read now (the guard pages catch overruns)
    Shadow* sh;
    smem_at(dst, 16, &sh);
    for (int i = 0; i < 16; ++i) sh[i].pending = t;
    st().cur->pending.push_back(p);
}
inline void commit() { ++st().cur->committed; }
// st.shared.b32, checked like a copy's landing: no other thread may touch the bytes between the
// same two barriers, and no cp.async may be in flight to them.
inline void sts32(unsigned addr, unsigned v) {
    const int t = tid();
    check_write(addr, 4, t, true);
    Shadow* sh;
    unsigned char* d = smem_at(addr, 4, &sh);
    std::memcpy(d, &v, 4);
    for (int i = 0; i < 4; ++i) {
        sh[i].w_epoch = st().epoch;
        sh[i].w_tid = t;
    }
}
// red.global.add.f32 (the blocks run one after another, so a plain add; their order is what
// varies, see launch's `order_seed`).
inline void red_add(float* p, float v) {
    ++st().n_red;
    *p += v;
}
// cp.async.wait_group n: every committed group but the n most recent is complete (copies not yet
// committed are not waited for).
inline void wait_group(int n) {
    const int t = tid();
    Fiber& f = *st().cur;
    std::vector<Pending> keep;
    for (Pending& p : f.pending) {
        if (p.group >= f.committed - n) {
            keep.push_back(p);
            continue;
        }
        Shadow* sh;
        unsigned char* d = smem_at(p.dst, 16, &sh);
        for (int i = 0; i < 16; ++i) sh[i].pending = -1;
        check_write(p.dst, 16, t, false);
        std::memcpy(d, p.data, 16);
        for (int i = 0; i < 16; ++i) {
            sh[i].w_epoch = st().epoch;
            sh[i].w_tid = t;
        }
    }
    f.pending = keep;
}

// ---- barriers and warp collectives -----------------------------------------------------------
inline void syncthreads() {
    State& s = st();
    const unsigned long g = s.bar_gen;
    if (++s.bar_arrived == THREADS) {
        s.bar_arrived = 0;
        ++s.bar_gen;
        ++s.epoch;
        ++s.progress;
        ++s.n_bar;
        return;
    }
    while (s.bar_gen == g) yield();
}

inline float bf16f(unsigned short h) {
    unsigned u = (unsigned)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float f16f(unsigned short h) {
    const unsigned sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
    float v;
    if (exp == 0) v = std::ldexp((float)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = std::ldexp((float)(man | 1024), (int)exp - 25);
    return sign ? -v : v;
}
inline unsigned short f32_bf16(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(((u >> 16) & 0x8000u) | 0x7fc0u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
inline unsigned short f32_f16(float f) {  // round to nearest even
    unsigned u;
    std::memcpy(&u, &f, 4);
    const unsigned sign = (u >> 16) & 0x8000u;
    const unsigned a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (a < 0x38800000u) {                                           // subnormal or zero in f16
        float af;
        std::memcpy(&af, &a, 4);
        const float q = std::nearbyint(af * 16777216.0f);            // units of 2^-24, ties to even
        return (unsigned short)(sign | (unsigned)q);
    }
    unsigned r = a - 0x38000000u;  // rebias 127 -> 15
    r = r + 0xfffu + ((r >> 13) & 1u);
    return (unsigned short)(sign | (r >> 13));
}

// Reads shared 16 bytes at `addr` for lane l's row (checked as a read by that lane's thread).
inline const unsigned char* row16(Warp& w, int l, int warp_id) {
    const unsigned addr = w.slot[l].addr;
    check_read(addr, 16, warp_id * 32 + l);
    Shadow* sh;
    return smem_at(addr, 16, &sh);
}

inline void complete(Warp& w, int warp_id) {
    const Kind k = w.slot[0].kind;
    for (int l = 1; l < 32; ++l)
        if (w.slot[l].kind != k) fail("warp %d: lanes disagree on the collective (%d vs %d)", warp_id, (int)w.slot[l].kind, (int)k);
    if (k == SHFL_XOR) {
        for (int t = 0; t < 32; ++t) {
            if (w.slot[t].mask != 0xffffffffu) fail("shfl with a partial mask");
            w.slot[t].d[0] = w.slot[t ^ w.slot[t].lanemask].val;
        }
        return;
    }
    if (k == LDSM || k == LDSM_T) {
        ++st().n_ldsm;
        unsigned short m[4][8][8];  // matrix, row, col
        for (int j = 0; j < 4; ++j)
            for (int r = 0; r < 8; ++r) {
                const unsigned char* p = row16(w, 8 * j + r, warp_id);
                std::memcpy(m[j][r], p, 16);
            }
        for (int t = 0; t < 32; ++t)
            for (int j = 0; j < 4; ++j) {
                unsigned short lo, hi;
                if (k == LDSM) {
                    lo = m[j][t / 4][2 * (t % 4)];
                    hi = m[j][t / 4][2 * (t % 4) + 1];
                } else {
                    lo = m[j][2 * (t % 4)][t / 4];
                    hi = m[j][2 * (t % 4) + 1][t / 4];
                }
                w.slot[t].out[j] = lo | ((unsigned)hi << 16);
            }
    } else {
        ++st().n_mma;
        float (*cv)(unsigned short) = k == MMA_BF16 ? bf16f : f16f;
        double A[16][16], Bm[16][8], C[16][8];
        for (int t = 0; t < 32; ++t) {
            const int g = t / 4, q = t % 4;
            const Slot& s = w.slot[t];
            auto put = [&](int r, int c, unsigned v) {
                A[r][c] = cv(v & 0xffff);
                A[r][c + 1] = cv(v >> 16);
            };
            put(g, 2 * q, s.a[0]);
            put(g + 8, 2 * q, s.a[1]);
            put(g, 2 * q + 8, s.a[2]);
            put(g + 8, 2 * q + 8, s.a[3]);
            Bm[2 * q][g] = cv(s.b[0] & 0xffff);
            Bm[2 * q + 1][g] = cv(s.b[0] >> 16);
            Bm[2 * q + 8][g] = cv(s.b[1] & 0xffff);
            Bm[2 * q + 9][g] = cv(s.b[1] >> 16);
            C[g][2 * q] = s.c[0];
            C[g][2 * q + 1] = s.c[1];
            C[g + 8][2 * q] = s.c[2];
            C[g + 8][2 * q + 1] = s.c[3];
        }
        float D[16][8];
        for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 8; ++j) {
                double acc = C[i][j];
                for (int kk = 0; kk < 16; ++kk) acc += A[i][kk] * Bm[kk][j];
                D[i][j] = (float)acc;
            }
        for (int t = 0; t < 32; ++t) {
            const int g = t / 4, q = t % 4;
            Slot& s = w.slot[t];
            s.d[0] = D[g][2 * q];
            s.d[1] = D[g][2 * q + 1];
            s.d[2] = D[g + 8][2 * q];
            s.d[3] = D[g + 8][2 * q + 1];
        }
    }
}

inline Slot& collective(Slot in) {
    State& s = st();
    const int t = tid(), wi = t / 32, l = t % 32;
    Warp& w = s.warp[wi];
    w.slot[l] = in;
    const unsigned long g = w.gen;
    if (++w.arrived == 32) {
        complete(w, wi);
        w.arrived = 0;
        ++w.gen;
        ++s.progress;
    } else {
        while (w.gen == g) yield();
    }
    return w.slot[l];
}

// ---- running a grid ---------------------------------------------------------------------------
inline std::function<void()> g_body;
inline void trampoline() {
    g_body();
    State& s = st();
    if (!s.cur->pending.empty()) fail("thread %d exits with cp.async copies never waited for", tid());
    s.cur->done = true;
    ++s.progress;
    swapcontext(&s.cur->ctx, &s.sched);
}

// Runs `body` (the kernel call) for every block of the grid, one block at a time: in order, or
// with order_seed != 0 in a shuffled order (the fused backward's atomics then add in another
// order, as they do on a GPU).
inline void launch(unsigned grid, const std::function<void()>& body, unsigned long long order_seed = 0) {
    State& s = st();
    grid_dim = {grid, 1, 1};
    g_body = body;
    std::vector<unsigned> order(grid);
    for (unsigned b = 0; b < grid; ++b) order[b] = b;
    unsigned long long x = order_seed;
    for (unsigned i = grid - 1; order_seed && i > 0; --i) {  // Fisher-Yates, xorshift64
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::swap(order[i], order[x % (i + 1)]);
    }
    for (unsigned b : order) {
        block_idx = {b, 0, 0};
        for (size_t r = 0; r < s.regions.size(); ++r) {  // shared memory starts as garbage (NaN)
            std::memset(s.regions[r].p, 0xff, s.regions[r].size);
            for (Shadow& x : s.shadow[r]) x = Shadow();
        }
        s.bar_arrived = 0;
        for (int w = 0; w < THREADS / 32; ++w) s.warp[w].arrived = 0;
        for (int t = 0; t < THREADS; ++t) {
            Fiber& f = s.fib[t];
            f.stack.resize(1 << 18);
            f.done = false;
            f.tid = {(unsigned)t, 0, 0};
            f.pending.clear();
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = f.stack.data();
            f.ctx.uc_stack.ss_size = f.stack.size();
            f.ctx.uc_link = nullptr;
            makecontext(&f.ctx, trampoline, 0);
        }
        for (;;) {
            bool all_done = true;
            const unsigned long before = s.progress;
            for (int t = 0; t < THREADS; ++t) {
                Fiber& f = s.fib[t];
                if (f.done) continue;
                all_done = false;
                s.cur = &f;
                swapcontext(&s.sched, &f.ctx);
            }
            if (all_done) break;
            if (s.progress == before) {
                int n_done = 0;
                for (int t = 0; t < THREADS; ++t) n_done += s.fib[t].done;
                fail("block %u: deadlock (%d threads exited, %d at a barrier)", b, n_done, s.bar_arrived);
            }
        }
        if (s.bar_arrived) fail("block %u: %d threads left waiting at a barrier", b, s.bar_arrived);
    }
}

}  // namespace emu

#define threadIdx (emu::st().cur->tid)
#define blockIdx (emu::block_idx)
#define gridDim (emu::grid_dim)
#define blockDim (emu::block_dim)
#define __syncthreads() emu::syncthreads()
#define smem_u32(p) emu::smem_register((p), sizeof(p))

inline float __shfl_xor_sync(unsigned mask, float v, int lanemask) {
    emu::Slot in{};
    in.kind = emu::SHFL_XOR;
    in.mask = mask;
    in.lanemask = (unsigned)lanemask;
    in.val = v;
    return emu::collective(in).d[0];
}
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
inline void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    emu::Slot in{};
    in.kind = emu::LDSM;
    in.addr = addr;
    emu::Slot& o = emu::collective(in);
    r0 = o.out[0], r1 = o.out[1], r2 = o.out[2], r3 = o.out[3];
}
inline void ldsm_x4_t(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    emu::Slot in{};
    in.kind = emu::LDSM_T;
    in.addr = addr;
    emu::Slot& o = emu::collective(in);
    r0 = o.out[0], r1 = o.out[1], r2 = o.out[2], r3 = o.out[3];
}

#define EMU_ELEMENT(NAME, KIND, ROUND)                                                         \
    struct NAME {                                                                              \
        static void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {     \
            emu::Slot in{};                                                                    \
            in.kind = KIND;                                                                    \
            for (int x = 0; x < 4; ++x) in.a[x] = a[x], in.c[x] = d[x];                        \
            in.b[0] = b0, in.b[1] = b1;                                                        \
            emu::Slot& o = emu::collective(in);                                                \
            for (int x = 0; x < 4; ++x) d[x] = o.d[x];                                         \
        }                                                                                      \
        static unsigned pack(float lo, float hi) { return ROUND(lo) | ((unsigned)ROUND(hi) << 16); } \
    };
EMU_ELEMENT(MmBF16, emu::MMA_BF16, emu::f32_bf16)
EMU_ELEMENT(MmF16, emu::MMA_F16, emu::f32_f16)
#undef EMU_ELEMENT
