// main.cpp — runs attention_mma_bwd.cu's backward kernels (D = 64 and 128, f16 and bf16) on the
// emulator (emu.h) against an f64 reference, both ways the op chains them: the two-kernel path
// (attn_bwd_dq_mma_*, attn_bwd_dkdv_mma_*) and the fused path (dq_acc zeroed, attn_bwd_fused_mma_*
// with its blocks in a shuffled order, then attn_bwd_dq_convert_*). out (rounded to the element
// type) and lse come from the reference (the forward kernel, attention_mma.cu, is checked on the
// GPU and by tools/attn_fwd_mma_emu.py; its inline PTX is beyond this emulator); delta is
// rowsum(dout * out) from the rounded out, as attn_bwd_delta computes it.
// Inputs: q, k, v dense, padded (row, head and batch padding, an offset start) or views of one
// packed [B, N, 3, H, D] buffer (Layout); dout dense [B, H, N, D], token-major [B, N, H, D] (the
// forward's out layout) or token-major padded with an offset start (GLayout). Outputs (GLayout,
// each path its own): dq, dk, dv dense (dv_at = -1); each its own padded buffer, token-major or
// head-major, every stride different from every other tensor's (dv_at = -1); or views of one packed
// [B, N, 3, H, D] gradient (dq at 0, dk at H D, dv through dv_at = H D past dk's first element,
// strides N 3 H D, D, 3 H D), exact or with row and batch padding and an offset start, Nq == Nk,
// the dv argument then a NaN decoy that must stay untouched. Every buffer ends at a PROT_NONE
// page (reads or writes past the end fault) and is preceded by NaN slack (reads before the start
// poison the results; the slack must stay intact). Outputs start as NaN: every element a view owns
// must be written (and match the reference), every element no view owns must still be NaN; the
// inputs (with their padding and slack) must be unchanged. Tolerances as
// kernels/tests/attention.rs: out 1e-2 (bf16) / 2e-3 (f16), dq, dk, dv 6e-2 / 1e-2, relative to
// the largest reference magnitude, plus 1e-5. A grid smaller than the tile count (grid/N in the
// report) exercises the grid-stride loop.
//   run.sh [quick|quick128|full]
#include <cstdarg>
#include "kern.inc"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>

using u16 = unsigned short;

// A buffer whose last element ends at a PROT_NONE page (reads past the end fault) and whose
// front is preceded by `slack` NaN elements (reads before the start poison the results).
struct Guarded {
    u16* data = nullptr;
    size_t n = 0;
    void* base = nullptr;
    size_t map = 0;
    static constexpr size_t slack = 256;
    explicit Guarded(size_t n_) : n(n_) {
        const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        const size_t bytes = (n + slack) * 2;
        const size_t body = (bytes + pg - 1) / pg * pg;
        map = body + pg;
        base = mmap(nullptr, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) emu::fail("mmap");
        mprotect((char*)base + body, pg, PROT_NONE);
        data = (u16*)((char*)base + body) - n;
        std::fill((u16*)base, (u16*)((char*)base + body), (u16)0xffff);
    }
    ~Guarded() { munmap(base, map); }
    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;
    bool slack_intact() const {
        for (u16* p = data - slack; p < data; ++p)
            if (*p != 0xffff) return false;
        return true;
    }
};
struct GuardedF {
    Guarded g;
    explicit GuardedF(size_t n) : g(2 * n) {}
    float* data() { return (float*)g.data; }
};

struct Rng {
    unsigned long long s;
    double unit() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return (double)((s * 0x2545F4914F6CDD1DULL) >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
    }
};

// Where q, k, v are read from (as before the output strides came).
enum Layout { DENSE, PADDED, PACKED };
// Where dout is read from and dq, dk, dv are written to:
//   G_DENSE: dout, dq, dk, dv dense [B, H, N, D], each a buffer of its own (dv_at = -1);
//   G_STRIDED: dout token-major [B, N, H, D] with row and batch padding and an offset start; dq
//     token-major, dk head-major and dv token-major, each padded its own way, each a buffer of its
//     own (dv_at = -1; every stride differs from every other tensor's);
//   G_PACKED: dout token-major [B, N, H, D] exactly; dq, dk, dv views of one packed [B, N, 3, H, D]
//     gradient (dq at 0, dk at H D, dv through dv_at = H D past dk's first element; the dv argument
//     is a NaN decoy that must stay untouched); Nq == Nk;
//   G_PACKED_PAD: as G_PACKED with the packed rows and batches padded and an offset start (elements
//     no view owns), dout padded as G_STRIDED's.
enum GLayout { G_DENSE, G_STRIDED, G_PACKED, G_PACKED_PAD };
static const char* const layout_name[] = {"dense", "padded", "packed"};
static const char* const glayout_name[] = {"dense", "strided", "packed", "packed+pad"};

struct Case {
    int D;
    bool bf16;
    int B, H, Nq, Nk;
    bool causal;
    Layout layout;    // q, k, v
    GLayout glayout;  // dout, dq, dk, dv
    unsigned grid_div;  // launch ceil(tiles / grid_div) blocks (grid-stride beyond)
};

// A [B, H, n, D] view: element strides (batch, head, row; unit last) and its first element's
// offset in buffer `buf`.
struct View {
    long long sb, sh, sr;
    size_t off;
    int buf;
};
static long long at(const View& w, int b, int h, int r, int d) {
    return (long long)w.off + b * w.sb + h * w.sh + r * w.sr + d;
}

// Guarded buffers and the views placed in them; `owned` marks the elements some view covers.
struct Bufs {
    std::vector<std::unique_ptr<Guarded>> g;
    std::vector<std::vector<char>> owned;
    int B, H, D;
    Bufs(int B_, int H_, int D_) : B(B_), H(H_), D(D_) {}
    int add(size_t n) {
        n = std::max<size_t>(1, n);
        g.emplace_back(new Guarded(n));
        owned.emplace_back(n, 0);
        return (int)g.size() - 1;
    }
    u16* ptr(const View& w) const { return g[w.buf]->data + w.off; }
    template <class F>
    void each(const View& w, int n, F f) const {
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h)
                for (int r = 0; r < n; ++r)
                    for (int d = 0; d < D; ++d) f(at(w, b, h, r, d), (((size_t)b * H + h) * n + r) * D + d);
    }
    // Marks the view's n rows owned (a harness error if two views overlap or one leaves its buffer).
    void own(const View& w, int n) {
        std::vector<char>& o = owned[w.buf];
        each(w, n, [&](long long i, size_t) {
            if (i < 0 || (size_t)i >= o.size()) emu::fail("harness: a view leaves its buffer");
            if (o[i]) emu::fail("harness: two views overlap");
            o[i] = 1;
        });
    }
    // Places dense [B, H, n, D] data `s` into the view.
    void put(const View& w, const std::vector<u16>& s, int n) {
        own(w, n);
        each(w, n, [&](long long i, size_t j) { g[w.buf]->data[i] = s[j]; });
    }
    // The view's elements, dense [B, H, n, D].
    std::vector<u16> get(const View& w, int n) const {
        std::vector<u16> v((size_t)B * H * n * D);
        each(w, n, [&](long long i, size_t j) { v[j] = g[w.buf]->data[i]; });
        return v;
    }
    // Every buffer with its slack, to compare before and after (inputs must stay as they were).
    std::vector<std::vector<u16>> snapshot() const {
        std::vector<std::vector<u16>> s;
        for (auto& b : g) s.emplace_back(b->data - Guarded::slack, b->data + b->n);
        return s;
    }
    // Outputs: the elements no view owns still NaN (0xffff) and the slack intact; counts them.
    std::string untouched(const char* what, size_t& checked) const {
        std::string why;
        for (size_t k = 0; k < g.size(); ++k) {
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < g[k]->n; ++i) {
                if (owned[k][i]) continue;
                ++checked;
                if (g[k]->data[i] != 0xffff && bad++ == 0) first = i;
            }
            char buf[160];
            if (bad) {
                snprintf(buf, sizeof buf, " %s buffer %zu: %zu elements no view owns written (first at %zu)", what, k,
                         bad, first);
                why += buf;
            }
            if (!g[k]->slack_intact()) {
                snprintf(buf, sizeof buf, " %s buffer %zu: SLACK WRITTEN", what, k);
                why += buf;
            }
        }
        return why;
    }
};

// One set of gradients (dq, dk, dv) placed as `gl` (the two-kernel path and the fused one each
// write their own).
struct Grads {
    Bufs m;
    View dq{}, dk{}, dv{};
    long long dv_at = -1;
    std::unique_ptr<Guarded> decoy;  // the dv argument when dv_at >= 0: never to be written
    Grads(GLayout gl, int B, int H, int Nq, int Nk, int D) : m(B, H, D) {
        const long long HD = (long long)H * D;
        switch (gl) {
            case G_DENSE:
                dq = {HD * Nq, (long long)Nq * D, D, 0, m.add((size_t)B * HD * Nq)};
                dk = {HD * Nk, (long long)Nk * D, D, 0, m.add((size_t)B * HD * Nk)};
                dv = {HD * Nk, (long long)Nk * D, D, 0, m.add((size_t)B * HD * Nk)};
                break;
            case G_STRIDED: {
                const long long qr = HD + 16, kr = D + 8, kh = Nk * kr + 16, vr = HD + 24;
                const long long qb = Nq * qr + 8, kb = H * kh + 8, vb = Nk * vr + 8;
                dq = {qb, D, qr, 24, m.add(24 + (size_t)B * qb)};
                dk = {kb, kh, kr, 8, m.add(8 + (size_t)B * kb)};
                dv = {vb, D, vr, 16, m.add(16 + (size_t)B * vb)};
                break;
            }
            case G_PACKED:
            case G_PACKED_PAD: {
                if (Nq != Nk) emu::fail("packed gradient needs Nq == Nk");
                const long long pad = gl == G_PACKED_PAD ? 8 : 0;
                const long long sr = 3 * HD + pad, sb = Nq * sr + 2 * pad;
                const int buf = m.add(pad + (size_t)B * sb);
                dq = {sb, D, sr, (size_t)pad, buf};
                dk = {sb, D, sr, (size_t)(pad + HD), buf};
                dv_at = HD;
                dv = {sb, D, sr, dk.off + (size_t)dv_at, buf};
                decoy.reset(new Guarded(pad + (size_t)B * sb + 1));  // as large as the packed buffer
                break;
            }
        }
        m.own(dq, Nq);
        m.own(dk, Nk);
        m.own(dv, Nk);
    }
    u16* dv_arg() const { return dv_at >= 0 ? decoy->data : m.ptr(dv); }
    std::string untouched(const char* what, size_t& checked) const {
        std::string why = m.untouched(what, checked);
        if (decoy) {
            bool clean = decoy->slack_intact();
            for (size_t i = 0; i < decoy->n; ++i) clean &= decoy->data[i] == 0xffff;
            if (!clean) why += std::string(" ") + what + ": the dv argument written (dv_at >= 0)";
        }
        return why;
    }
};

static int failures = 0;
// dq elements of the fused path whose bits differ from the two-kernel path's, of all compared.
static size_t dq_bits_differ = 0, dq_compared = 0;
// Output elements compared with the reference; elements no view owns checked untouched.
static size_t n_compared = 0, n_unowned = 0;

static bool run_case(const Case& c, unsigned long long seed) {
    const int D = c.D, B = c.B, H = c.H, Nq = c.Nq, Nk = c.Nk;
    float (*cv)(u16) = c.bf16 ? emu::bf16f : emu::f16f;
    u16 (*rd)(float) = c.bf16 ? emu::f32_bf16 : emu::f32_f16;
    Rng rng{seed * 0x9E3779B97F4A7C15ULL | 1};
    auto gen = [&](size_t n) {
        std::vector<u16> v(n);
        for (auto& x : v) x = rd((float)rng.unit());
        return v;
    };
    const size_t nq = (size_t)B * H * Nq * D, nk = (size_t)B * H * Nk * D;
    std::vector<u16> q = gen(nq), k = gen(nk), v = gen(nk), dout = gen(nq);
    const float scale = (float)(1.0 / std::sqrt((double)D));

    // Inputs: q, k, v as c.layout, then dout as c.glayout.
    View views[3];
    Bufs in(B, H, D);
    const std::vector<u16>* src[3] = {&q, &k, &v};
    if (c.layout == PACKED) {
        if (Nq != Nk) emu::fail("packed needs Nq == Nk");
        const long long sr = 3LL * H * D, sb = (long long)Nq * sr;
        const int buf = in.add((size_t)B * sb);
        for (int t = 0; t < 3; ++t) {
            views[t] = {sb, (long long)D, sr, (size_t)t * H * D, buf};
            in.put(views[t], *src[t], Nq);
        }
    } else {
        for (int t = 0; t < 3; ++t) {
            const int n = t == 0 ? Nq : Nk;
            View w;
            if (c.layout == DENSE) w = {(long long)H * n * D, (long long)n * D, (long long)D, 0, 0};
            else {
                const long long sr = D + 16, sh = n * sr + 8;
                w = {H * sh + 24, sh, sr, 8, 0};
            }
            w.buf = in.add(w.off + (size_t)B * w.sb);
            in.put(w, *src[t], n);
            views[t] = w;
        }
    }
    View wo;
    {
        const long long HD = (long long)H * D;
        if (c.glayout == G_DENSE) wo = {HD * Nq, (long long)Nq * D, D, 0, 0};
        else if (c.glayout == G_PACKED) wo = {Nq * HD, D, HD, 0, 0};
        else wo = {Nq * (HD + 8) + 16, D, HD + 8, 8, 0};
        wo.buf = in.add(wo.off + (size_t)B * wo.sb);
        in.put(wo, dout, Nq);
    }
    const std::vector<std::vector<u16>> in_before = in.snapshot();

    // Reference (f64) from the rounded inputs.
    std::vector<double> rq(nq), rk(nk), rv(nk), rdo(nq);
    for (size_t i = 0; i < nq; ++i) rq[i] = cv(q[i]), rdo[i] = cv(dout[i]);
    for (size_t i = 0; i < nk; ++i) rk[i] = cv(k[i]), rv[i] = cv(v[i]);
    std::vector<double> want_dq(nq, 0.0), want_dk(nk, 0.0), want_dv(nk, 0.0), want_out(nq, 0.0);
    std::vector<float> lse((size_t)B * H * Nq), delta((size_t)B * H * Nq);
    for (int bh = 0; bh < B * H; ++bh) {
        const double* Q = &rq[(size_t)bh * Nq * D];
        const double* K = &rk[(size_t)bh * Nk * D];
        const double* V = &rv[(size_t)bh * Nk * D];
        const double* dO = &rdo[(size_t)bh * Nq * D];
        for (int i = 0; i < Nq; ++i) {
            std::vector<double> s(Nk), p(Nk, 0.0);
            double mx = -INFINITY;
            for (int j = 0; j < Nk; ++j) {
                const bool vis = !c.causal || (long long)j <= (long long)i + Nk - Nq;
                double acc = 0;
                for (int d = 0; d < D; ++d) acc += Q[i * D + d] * K[(size_t)j * D + d];
                s[j] = vis ? acc * scale : -INFINITY;
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            if (mx > -INFINITY)
                for (int j = 0; j < Nk; ++j) sum += p[j] = std::exp(s[j] - mx);
            const double l = sum > 0 ? mx + std::log(sum) : -INFINITY;
            lse[(size_t)bh * Nq + i] = (float)l;
            std::vector<double> o(D, 0.0);
            for (int j = 0; j < Nk; ++j) {
                if (sum > 0) p[j] /= sum;
                for (int d = 0; d < D; ++d) o[d] += p[j] * V[(size_t)j * D + d];
            }
            double dle = 0;
            for (int d = 0; d < D; ++d) {
                dle += o[d] * dO[i * D + d];
                want_out[((size_t)bh * Nq + i) * D + d] = o[d];
            }
            for (int j = 0; j < Nk; ++j) {
                if (p[j] == 0) continue;
                double dp = 0;
                for (int d = 0; d < D; ++d) dp += dO[i * D + d] * V[(size_t)j * D + d];
                const double ds = p[j] * (dp - dle);
                for (int d = 0; d < D; ++d) {
                    want_dq[((size_t)bh * Nq + i) * D + d] += scale * ds * K[(size_t)j * D + d];
                    want_dk[((size_t)bh * Nk + j) * D + d] += scale * ds * Q[i * D + d];
                    want_dv[((size_t)bh * Nk + j) * D + d] += p[j] * dO[i * D + d];
                }
            }
        }
    }

    const u16* qp = in.ptr(views[0]);
    const u16* kp = in.ptr(views[1]);
    const u16* vp = in.ptr(views[2]);
    const u16* dop = in.ptr(wo);
    const View &wq = views[0], &wk = views[1], &wv = views[2];
    const int causal = c.causal;
    // The entry point of this head dimension and element type.
    auto pick = [&](auto d64_bf16, auto d64_f16, auto d128_bf16, auto d128_f16) {
        return D == 64 ? (c.bf16 ? d64_bf16 : d64_f16) : (c.bf16 ? d128_bf16 : d128_f16);
    };
    auto grid_for = [&](int rows) {
        const unsigned tiles = (unsigned)(B * H * ((rows + 63) / 64));
        return std::max(1u, (tiles + c.grid_div - 1) / c.grid_div);
    };
    Guarded g_out(std::max<size_t>(1, nq));
    GuardedF g_lse(std::max<size_t>(1, lse.size()));
    bool ok = true;
    std::string why;
    for (size_t i = 0; i < nq; ++i) g_out.data[i] = rd((float)want_out[i]);
    std::copy(lse.begin(), lse.end(), g_lse.data());
    // delta as attn_bwd_delta computes it: from the rounded out.
    for (size_t r = 0; r < lse.size(); ++r) {
        float dl = 0;
        for (int d = 0; d < D; ++d) dl += cv(g_out.data[r * D + d]) * cv(dout[r * D + d]);
        delta[r] = dl;
    }

    // The two-kernel path's gradients (G) and the fused path's (F), both placed as c.glayout, and
    // the fused path's f32 dQ accumulator (dense, zeroed, as the op's memset does).
    const Grads G(c.glayout, B, H, Nq, Nk, D), F(c.glayout, B, H, Nq, Nk, D);
    GuardedF f_acc(std::max<size_t>(1, nq));
    std::fill(f_acc.data(), f_acc.data() + nq, 0.0f);
    GuardedF g_delta(std::max<size_t>(1, lse.size()));
    std::copy(delta.begin(), delta.end(), g_delta.data());
    if ((size_t)B * H * Nq > 0) {
        auto dq = pick(attn_bwd_dq_mma_d64_bf16, attn_bwd_dq_mma_d64_f16, attn_bwd_dq_mma_d128_bf16,
                       attn_bwd_dq_mma_d128_f16);
        emu::launch(grid_for(Nq), [&] {
            dq(qp, kp, vp, dop, g_lse.data(), g_delta.data(), G.m.ptr(G.dq), B, H, Nq, Nk, D, wq.sb, wq.sh, wq.sr,
               wk.sb, wk.sh, wk.sr, wv.sb, wv.sh, wv.sr, wo.sb, wo.sh, wo.sr, G.dq.sb, G.dq.sh, G.dq.sr, scale,
               causal);
        });
    }
    if ((size_t)B * H * Nk > 0) {
        auto dkdv = pick(attn_bwd_dkdv_mma_d64_bf16, attn_bwd_dkdv_mma_d64_f16, attn_bwd_dkdv_mma_d128_bf16,
                         attn_bwd_dkdv_mma_d128_f16);
        emu::launch(grid_for(Nk), [&] {
            dkdv(qp, kp, vp, dop, g_lse.data(), g_delta.data(), G.m.ptr(G.dk), G.dv_arg(), B, H, Nq, Nk, D, wq.sb,
                 wq.sh, wq.sr, wk.sb, wk.sh, wk.sr, wv.sb, wv.sh, wv.sr, wo.sb, wo.sh, wo.sr, G.dk.sb, G.dk.sh,
                 G.dk.sr, G.dv.sb, G.dv.sh, G.dv.sr, G.dv_at, scale, causal);
        });
    }

    if ((size_t)B * H * Nk > 0) {
        auto fused = pick(attn_bwd_fused_mma_d64_bf16, attn_bwd_fused_mma_d64_f16, attn_bwd_fused_mma_d128_bf16,
                          attn_bwd_fused_mma_d128_f16);
        emu::launch(
            grid_for(Nk),
            [&] {
                fused(qp, kp, vp, dop, g_lse.data(), g_delta.data(), f_acc.data(), F.m.ptr(F.dk), F.dv_arg(), B, H,
                      Nq, Nk, D, wq.sb, wq.sh, wq.sr, wk.sb, wk.sh, wk.sr, wv.sb, wv.sh, wv.sr, wo.sb, wo.sh, wo.sr,
                      F.dk.sb, F.dk.sh, F.dk.sr, F.dv.sb, F.dv.sh, F.dv.sr, F.dv_at, scale, causal);
            },
            seed);
    }
    if (nq > 0) {
        auto conv = c.bf16 ? attn_bwd_dq_convert_bf16 : attn_bwd_dq_convert_f16;
        // A grid that does not cover the array in one step (the grid-stride loop).
        const long long n4 = (long long)(nq / 4);
        const unsigned g = (unsigned)std::max(1LL, std::min(3LL, (n4 + 127) / 128));
        emu::launch(g, [&] { conv(f_acc.data(), F.m.ptr(F.dq), B, H, Nq, D, F.dq.sb, F.dq.sh, F.dq.sr, scale); });
    }

    const double tol = c.bf16 ? 6e-2 : 1e-2;
    auto cmp = [&](const char* what, const std::vector<u16>& got, const std::vector<double>& want) {
        double mx = 1e-300, err = 0;
        for (double w : want) mx = std::max(mx, std::fabs(w));
        size_t worst = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            const double x = cv(got[i]);
            const double e = std::isnan(x) ? INFINITY : std::fabs(x - want[i]);
            if (e > err) err = e, worst = i;
        }
        n_compared += want.size();
        const double rel = (err - 1e-5) / mx;
        if (!(err <= tol * mx + 1e-5)) {
            ok = false;
            char buf[256];
            snprintf(buf, sizeof buf, " %s: max err %.3g at %zu (got %g want %g, max |ref| %.3g)", what, err, worst,
                     want.empty() ? 0.0 : (double)cv(got[worst]), want.empty() ? 0.0 : want[worst], mx);
            why += buf;
        }
        return rel;
    };
    const std::vector<u16> g_dq = G.m.get(G.dq, Nq), g_dk = G.m.get(G.dk, Nk), g_dv = G.m.get(G.dv, Nk);
    const std::vector<u16> f_dq = F.m.get(F.dq, Nq), f_dk = F.m.get(F.dk, Nk), f_dv = F.m.get(F.dv, Nk);
    const double e1 = cmp("dq", g_dq, want_dq), e2 = cmp("dk", g_dk, want_dk), e3 = cmp("dv", g_dv, want_dv);
    const double f1 = cmp("fused dq", f_dq, want_dq), f2 = cmp("fused dk", f_dk, want_dk),
                 f3 = cmp("fused dv", f_dv, want_dv);
    // dk and dv of the fused kernel are computed exactly as the dk/dv kernel's: the same bits.
    if (f_dk != g_dk || f_dv != g_dv) ok = false, why += " fused dk/dv differ from the dk/dv kernel's";
    // Nothing written outside the views: the gradients' unowned elements, slack and dv decoy; the
    // accumulator's slack; the inputs (and their slack) as placed.
    const std::string gw = G.untouched("two-kernel", n_unowned) + F.untouched("fused", n_unowned);
    if (!gw.empty()) ok = false, why += gw;
    if (!f_acc.g.slack_intact()) ok = false, why += " dq_acc slack written";
    if (in.snapshot() != in_before) ok = false, why += " inputs (or their slack) written";
    for (size_t i = 0; i < nq; ++i) dq_bits_differ += f_dq[i] != g_dq[i];
    dq_compared += nq;
    printf("%s D=%d %s B=%d H=%d Nq=%d Nk=%d %s %s/%s grid/%u: rel err dq %.2e dk %.2e dv %.2e; fused dq %.2e dk "
           "%.2e dv %.2e%s\n",
           ok ? "ok  " : "FAIL", D, c.bf16 ? "bf16" : "f16", B, H, Nq, Nk, c.causal ? "causal" : "full",
           layout_name[c.layout], glayout_name[c.glayout], c.grid_div, std::max(0.0, e1), std::max(0.0, e2),
           std::max(0.0, e3), std::max(0.0, f1), std::max(0.0, f2), std::max(0.0, f3), why.c_str());
    fflush(stdout);
    if (!ok) ++failures;
    return ok;
}

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "quick";
    std::vector<Case> cases;
    auto add = [&](int D, bool bf, int B, int H, int nq, int nk, bool causal, Layout l, GLayout gl,
                   unsigned gd = 1) { cases.push_back({D, bf, B, H, nq, nk, causal, l, gl, gd}); };
    if (mode == "quick" || mode == "quick128") {
        for (int D : {128, 64}) {
            if (mode == "quick128" && D != 128) continue;
            for (bool causal : {false, true}) {
                add(D, true, 1, 2, 65, 65, causal, DENSE, G_DENSE);
                add(D, true, 1, 2, 31, 130, causal, PADDED, G_STRIDED);
                add(D, false, 1, 1, 130, 31, causal, DENSE, G_DENSE, 2);
                add(D, true, 2, 1, 130, 130, causal, PADDED, G_PACKED_PAD, 3);  // the grid-stride loop
                add(D, false, 2, 2, 33, 33, causal, PACKED, G_PACKED, 2);       // the op's packed case
            }
        }
    } else {
        // D = 128 (32-row tiles, K/V in dynamic shared memory) and D = 64 (64-row tiles, K/V of
        // the dk/dv kernel in registers, the fused kernel's K in a static tile) alike.
        const int ns[] = {1, 17, 64, 65, 130, 257};
        const int pairs[][2] = {{1, 17}, {17, 1}, {5, 64}, {64, 5}, {31, 130}, {130, 31}, {96, 33}, {33, 96}, {65, 257}, {257, 65}, {3, 0}, {0, 3}};
        for (int D : {128, 64})
            for (bool bf : {true, false})
                for (bool causal : {false, true}) {
                    for (int n : ns) {
                        add(D, bf, 1, 2, n, n, causal, PACKED, G_PACKED);
                        add(D, bf, 2, 1, n, n, causal, PADDED, G_PACKED_PAD, 3);
                    }
                    for (auto& p : pairs) {
                        add(D, bf, 1, 2, p[0], p[1], causal, DENSE, G_DENSE, 2);
                        if (bf) add(D, bf, 2, 1, p[0], p[1], causal, PADDED, G_STRIDED, 3);
                    }
                }
    }
    unsigned long long seed = 1;
    for (const Case& c : cases) run_case(c, seed++);
    printf("%zu cases, %d failed; %zu output elements compared with the reference, %zu unowned checked untouched; "
           "%lu mma, %lu ldmatrix, %lu barriers, %lu atomic adds emulated; fused dq differs in its bits from the "
           "two-kernel path's in %zu of %zu elements\n",
           cases.size(), failures, n_compared, n_unowned, emu::st().n_mma, emu::st().n_ldsm, emu::st().n_bar,
           emu::st().n_red, dq_bits_differ, dq_compared);
    return failures ? 1 : 0;
}
