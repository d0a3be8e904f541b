// main.cpp — runs attention_mma_bwd.cu's backward kernels (D = 64 and 128, f16 and bf16) on the
// emulator (emu.h) against an f64 reference, both ways the op chains them: the two-kernel path
// (attn_bwd_dq_mma_*, attn_bwd_dkdv_mma_*) and the fused path (dq_acc zeroed, attn_bwd_fused_mma_*
// with its blocks in a shuffled order, then attn_bwd_dq_convert_*). out (rounded to the element
// type) and lse come from the reference (the forward kernel, attention_mma.cu, is checked on the
// GPU and by tools/attn_fwd_mma_emu.py; its inline PTX is beyond this emulator); delta is
// rowsum(dout * out) from the rounded out, as attn_bwd_delta computes it.
// Inputs are placed dense, padded (row, head and batch padding, an offset start) or as views of
// one packed [B, N, 3, H, D] buffer, each ending at a PROT_NONE page (reads past the end fault)
// and preceded by NaN (reads before the start poison the results); outputs start as NaN (every
// element must be written). Tolerances as kernels/tests/attention.rs: out 1e-2 (bf16) / 2e-3
// (f16), dq, dk, dv 6e-2 / 1e-2, relative to the largest reference magnitude, plus 1e-5.
// A grid smaller than the tile count (grid/N in the report) exercises the grid-stride loop.
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

enum Layout { DENSE, PADDED, PACKED };

struct Case {
    int D;
    bool bf16;
    int B, H, Nq, Nk;
    bool causal;
    Layout layout;
    unsigned grid_div;  // launch ceil(tiles / grid_div) blocks (grid-stride beyond)
};

static int failures = 0;
// dq elements of the fused path whose bits differ from the two-kernel path's, of all compared.
static size_t dq_bits_differ = 0, dq_compared = 0;

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

    // Placement: strides (batch, head, row) and offsets per tensor.
    struct View {
        long long sb, sh, sr;
        size_t off;
        int buf;
    };
    View views[3];
    std::vector<std::unique_ptr<Guarded>> bufs;
    const std::vector<u16>* src[3] = {&q, &k, &v};
    auto place = [&](Guarded& g, const std::vector<u16>& s, const View& w, int n) {
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h)
                for (int r = 0; r < n; ++r)
                    for (int d = 0; d < D; ++d)
                        g.data[w.off + b * w.sb + h * w.sh + (long long)r * w.sr + d] =
                            s[(((size_t)b * H + h) * n + r) * D + d];
    };
    if (c.layout == PACKED) {
        if (Nq != Nk) emu::fail("packed needs Nq == Nk");
        const long long sr = 3LL * H * D, sb = (long long)Nq * sr;
        bufs.emplace_back(new Guarded(std::max<size_t>(1, (size_t)B * sb)));
        for (int t = 0; t < 3; ++t) {
            views[t] = {sb, (long long)D, sr, (size_t)t * H * D, 0};
            place(*bufs[0], *src[t], views[t], Nq);
        }
    } else {
        for (int t = 0; t < 3; ++t) {
            const int n = t == 0 ? Nq : Nk;
            View w;
            if (c.layout == DENSE) w = {(long long)H * n * D, (long long)n * D, (long long)D, 0, t};
            else {
                const long long sr = D + 16, sh = n * sr + 8;
                w = {H * sh + 24, sh, sr, 8, t};
            }
            const size_t len = std::max<size_t>(1, w.off + (size_t)B * w.sb);
            bufs.emplace_back(new Guarded(len));
            place(*bufs.back(), *src[t], w, n);
            views[t] = w;
        }
    }

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

    const u16* qp = bufs[views[0].buf]->data + views[0].off;
    const u16* kp = bufs[views[1].buf]->data + views[1].off;
    const u16* vp = bufs[views[2].buf]->data + views[2].off;
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

    // Device-side buffers.
    Guarded g_do(std::max<size_t>(1, nq)), g_dq(std::max<size_t>(1, nq)), g_dk(std::max<size_t>(1, nk)),
        g_dv(std::max<size_t>(1, nk));
    // The fused path's outputs and its f32 dQ accumulator (zeroed, as the op's memset does).
    Guarded f_dq(std::max<size_t>(1, nq)), f_dk(std::max<size_t>(1, nk)), f_dv(std::max<size_t>(1, nk));
    GuardedF f_acc(std::max<size_t>(1, nq));
    std::fill(f_acc.data(), f_acc.data() + nq, 0.0f);
    GuardedF g_delta(std::max<size_t>(1, lse.size()));
    std::copy(dout.begin(), dout.end(), g_do.data);
    std::copy(delta.begin(), delta.end(), g_delta.data());
    if ((size_t)B * H * Nq > 0) {
        auto dq = pick(attn_bwd_dq_mma_d64_bf16, attn_bwd_dq_mma_d64_f16, attn_bwd_dq_mma_d128_bf16,
                       attn_bwd_dq_mma_d128_f16);
        emu::launch(grid_for(Nq), [&] {
            dq(qp, kp, vp, g_do.data, g_lse.data(), g_delta.data(), g_dq.data, B, H, Nq, Nk, D, wq.sb, wq.sh, wq.sr,
               wk.sb, wk.sh, wk.sr, wv.sb, wv.sh, wv.sr, scale, causal);
        });
    }
    if ((size_t)B * H * Nk > 0) {
        auto dkdv = pick(attn_bwd_dkdv_mma_d64_bf16, attn_bwd_dkdv_mma_d64_f16, attn_bwd_dkdv_mma_d128_bf16,
                         attn_bwd_dkdv_mma_d128_f16);
        emu::launch(grid_for(Nk), [&] {
            dkdv(qp, kp, vp, g_do.data, g_lse.data(), g_delta.data(), g_dk.data, g_dv.data, B, H, Nq, Nk, D, wq.sb,
                 wq.sh, wq.sr, wk.sb, wk.sh, wk.sr, wv.sb, wv.sh, wv.sr, scale, causal);
        });
    }

    if ((size_t)B * H * Nk > 0) {
        auto fused = pick(attn_bwd_fused_mma_d64_bf16, attn_bwd_fused_mma_d64_f16, attn_bwd_fused_mma_d128_bf16,
                          attn_bwd_fused_mma_d128_f16);
        emu::launch(
            grid_for(Nk),
            [&] {
                fused(qp, kp, vp, g_do.data, g_lse.data(), g_delta.data(), f_acc.data(), f_dk.data, f_dv.data, B, H,
                      Nq, Nk, D, wq.sb, wq.sh, wq.sr, wk.sb, wk.sh, wk.sr, wv.sb, wv.sh, wv.sr, scale, causal);
            },
            seed);
    }
    if (nq > 0) {
        auto conv = c.bf16 ? attn_bwd_dq_convert_bf16 : attn_bwd_dq_convert_f16;
        // A grid that does not cover the array in one step (the grid-stride loop).
        const long long n4 = (long long)(nq / 4);
        const unsigned g = (unsigned)std::max(1LL, std::min(3LL, (n4 + 127) / 128));
        emu::launch(g, [&] { conv(f_acc.data(), f_dq.data, n4, scale); });
    }

    const double tol = c.bf16 ? 6e-2 : 1e-2;
    auto cmp = [&](const char* what, const Guarded& g, const std::vector<double>& want) {
        double mx = 1e-300, err = 0;
        for (double w : want) mx = std::max(mx, std::fabs(w));
        size_t worst = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            const double got = cv(g.data[i]);
            const double e = std::isnan(got) ? INFINITY : std::fabs(got - want[i]);
            if (e > err) err = e, worst = i;
        }
        const double rel = (err - 1e-5) / mx;
        if (!(err <= tol * mx + 1e-5) || !g.slack_intact()) {
            ok = false;
            char buf[256];
            snprintf(buf, sizeof buf, " %s: max err %.3g at %zu (got %g want %g, max |ref| %.3g)%s", what, err, worst,
                     want.empty() ? 0.0 : (double)cv(g.data[worst]), want.empty() ? 0.0 : want[worst], mx,
                     g.slack_intact() ? "" : " SLACK WRITTEN");
            why += buf;
        }
        return rel;
    };
    const double e1 = cmp("dq", g_dq, want_dq), e2 = cmp("dk", g_dk, want_dk), e3 = cmp("dv", g_dv, want_dv);
    const double f1 = cmp("fused dq", f_dq, want_dq), f2 = cmp("fused dk", f_dk, want_dk),
                 f3 = cmp("fused dv", f_dv, want_dv);
    // dk and dv of the fused kernel are computed exactly as the dk/dv kernel's: the same bits.
    if (!std::equal(f_dk.data, f_dk.data + nk, g_dk.data) || !std::equal(f_dv.data, f_dv.data + nk, g_dv.data))
        ok = false, why += " fused dk/dv differ from the dk/dv kernel's";
    if (!f_acc.g.slack_intact()) ok = false, why += " dq_acc slack written";
    for (size_t i = 0; i < nq; ++i) dq_bits_differ += f_dq.data[i] != g_dq.data[i];
    dq_compared += nq;
    for (auto& b : bufs)
        if (!b->slack_intact()) ok = false, why += " input slack written";
    printf("%s D=%d %s B=%d H=%d Nq=%d Nk=%d %s %s grid/%u: rel err dq %.2e dk %.2e dv %.2e; fused dq %.2e dk %.2e dv "
           "%.2e%s\n",
           ok ? "ok  " : "FAIL", D, c.bf16 ? "bf16" : "f16", B, H, Nq, Nk, c.causal ? "causal" : "full",
           c.layout == DENSE ? "dense" : c.layout == PADDED ? "padded" : "packed", c.grid_div, std::max(0.0, e1),
           std::max(0.0, e2), std::max(0.0, e3), std::max(0.0, f1), std::max(0.0, f2), std::max(0.0, f3),
           why.c_str());
    fflush(stdout);
    if (!ok) ++failures;
    return ok;
}

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "quick";
    std::vector<Case> cases;
    auto add = [&](int D, bool bf, int B, int H, int nq, int nk, bool causal, Layout l, unsigned gd = 1) {
        cases.push_back({D, bf, B, H, nq, nk, causal, l, gd});
    };
    if (mode == "quick128") {
        for (bool causal : {false, true}) {
            add(128, true, 1, 2, 65, 65, causal, DENSE);
            add(128, true, 1, 1, 31, 130, causal, PADDED);
            add(128, false, 1, 1, 130, 31, causal, DENSE, 2);
            add(128, true, 2, 1, 130, 130, causal, PADDED, 3);
        }
    } else if (mode == "quick") {
        for (int D : {128, 64})
            for (bool causal : {false, true}) {
                add(D, true, 1, 2, 65, 65, causal, DENSE);
                add(D, true, 1, 1, 31, 130, causal, PADDED);
                add(D, false, 1, 1, 130, 31, causal, DENSE, 2);
                add(D, true, 2, 1, 130, 130, causal, PADDED, 3);  // the grid-stride loop
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
                        add(D, bf, 1, 2, n, n, causal, PACKED);
                        add(D, bf, 2, 1, n, n, causal, PADDED, 3);
                    }
                    for (auto& p : pairs) add(D, bf, 1, 2, p[0], p[1], causal, DENSE, 2);
                }
    }
    unsigned long long seed = 1;
    for (const Case& c : cases) run_case(c, seed++);
    printf("%zu cases, %d failed; %lu mma, %lu ldmatrix, %lu barriers, %lu atomic adds emulated; fused dq differs "
           "in its bits from the two-kernel path's in %zu of %zu elements\n",
           cases.size(), failures, emu::st().n_mma, emu::st().n_ldsm, emu::st().n_bar, emu::st().n_red,
           dq_bits_differ, dq_compared);
    return failures ? 1 : 0;
}
