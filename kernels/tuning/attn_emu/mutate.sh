#!/usr/bin/env bash
# mutate.sh — evidence that run.sh can fail: each line below breaks cuda/attention_mma_bwd.cu
# in one place (a wrong ldmatrix offset, a missing barrier or wait, a buffer overwritten while in
# use, an off-by-one mask, a stride of dout, dq, dk or dv mixed up, dv_at ignored...; the two-kernel
# path and the fused one), and the emulator (run.sh quick: D = 64 and 128; dense, strided and packed
# gradients) must report a wrong result or an error for every one ("caught"). The anchors are the source text at the time of writing: a mutation whose
# anchor no longer matches exactly once reports BAD ANCHOR.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cuda=$here/../../cuda
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/cuda"
cp "$cuda/attention_mma.cu" "$out/cuda/"
missed=0
while IFS='|' read -r desc from to; do
  [ -z "$desc" ] && continue
  if ! python3 - "$cuda/attention_mma_bwd.cu" "$from" "$to" > "$out/cuda/attention_mma_bwd.cu" <<'PY'
import sys
s = open(sys.argv[1]).read()
a, b = sys.argv[2].replace("\\n", "\n"), sys.argv[3].replace("\\n", "\n")
if s.count(a) != 1:
    sys.exit(1)
print(s.replace(a, b), end="")
PY
  then
    echo "BAD ANCHOR : $desc"; missed=$((missed + 1)); continue
  fi
  CUDA_SRC="$out/cuda" "$here/run.sh" quick > "$out/log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "MISSED     : $desc"; missed=$((missed + 1))
  else
    why=$(grep -m1 -E 'FAIL|EMU ERROR|error' "$out/log" | cut -c1-110)
    echo "caught     : $desc -- ${why:-exit status $rc, no report (a crash: a guard-page fault or the like)}"
  fi
done <<'LIST'
dkdv A operand lane offset|const unsigned ka_s = k_tile + warp * 16 * RB + off_t;|const unsigned ka_s = k_tile + warp * 16 * RB + off;
dkdv prefetch into the buffer in use|if (qt + 1 < n_qt) load_q(qt + 1, (qt + 1 - qt0) % NBUF);|if (qt + 1 < n_qt) load_q(qt + 1, (qt - qt0) % NBUF);
dkdv no wait before the barrier|            const unsigned q_tile = base + buf * 2 * TILE, do_tile = q_tile + TILE;\n            ab_wait_all();|            const unsigned q_tile = base + buf * 2 * TILE, do_tile = q_tile + TILE;
dkdv K tile of 32 rows|ab_load_tile<D, AB_ROWS>(k_tile, kb, k_sr, n0, Nk);|ab_load_tile<D, BM>(k_tile, kb, k_sr, n0, Nk);
dkdv lse of buffer 0 always|const float l2 = lse_s[buf][qi], dl = delta_s[buf][qi];|const float l2 = lse_s[0][qi], dl = delta_s[buf][qi];
dkdv first query tile rounded up|const int qt0 = q_start / BM, n_qt|const int qt0 = (q_start + BM - 1) / BM, n_qt
dkdv V operand from the K rows|AbSmemA{ka_s + KV_TILE}|AbSmemA{ka_s}
dkdv no barrier before the CTA tile's copies|        __syncthreads();  // the previous tile's shared reads are done\n        if (K_SMEM|        if (K_SMEM
dq prefetch into the buffer in use|const unsigned nk = base + ((kt + 1) % NBUF) * 2 * TILE;|const unsigned nk = base + (kt % NBUF) * 2 * TILE;
dq no barrier after the wait|            __syncthreads();  // tile kt is visible; with 2 buffers, every warp is done with tile kt - 1\n            if (NBUF == 2) {\n                if (kt + 1 < n_kt) {|            if (NBUF == 2) {\n                if (kt + 1 < n_kt) {
dq next tile at the wrong row|ab_load_tile<D, BN>(nk, kb, k_sr, n0 + BN, Nk);|ab_load_tile<D, BN>(nk, kb, k_sr, n0 + BN - 8, Nk);
dq key tiles counted in 64s|const int n_kt = (kv_end + BN - 1) / BN;|const int n_kt = (kv_end + 63) / 64;
dq causal limit off by one|const long long limit = causal ? (long long)row + Nk - Nq : (long long)Nk;\n#pragma unroll\n                for (int n = 0; n < NB; ++n)|const long long limit = causal ? (long long)row + Nk - Nq - 1 : (long long)Nk;\n#pragma unroll\n                for (int n = 0; n < NB; ++n)
fused no barrier between dS^T and dQ|                __syncthreads();  // the whole dS^T tile is visible\n|
fused dS^T stored at the wrong column|const unsigned ds_row = ds_tile + (warp * 16 + lane / 4) * RBS + quad * 4;|const unsigned ds_row = ds_tile + (warp * 16 + lane / 4) * RBS + quad * 2;
fused dS A operand lane map transposed|const unsigned a_lane = ds_tile + ab_lane_off<RBS>(lane) + mb * 32;|const unsigned a_lane = ds_tile + ab_lane_off_t<RBS>(lane) + mb * 32;
fused dQ B operand column in elements|const unsigned b_lane = k_tile + ab_lane_off_t<RB>(lane) + c0 * 2;|const unsigned b_lane = k_tile + ab_lane_off_t<RB>(lane) + c0;
fused every warp on the first columns|const int mb = warp % MB, dc0 = (warp / MB) * DC, r_first = m0 + 16 * mb;|const int mb = warp % MB, dc0 = 0, r_first = m0 + 16 * mb;
fused causal skip by the warp's first row|(long long)r_first + 15 + Nk - Nq >= (long long)n0)|(long long)r_first + Nk - Nq >= (long long)n0)
fused dQ rows past Nq added|                        if (row >= Nq) continue;\n|
fused no K tile at D = 64|        if (K_SMEM && qt0 < n_qt) ab_load_tile|        if (KV_SMEM && qt0 < n_qt) ab_load_tile
fused dQ of the other 8 rows|ab_red_add(p + 8 * n + 1, acc[n][2 * rr + 1]);|ab_red_add(p + 8 * n + 1, acc[n][2 * (1 - rr) + 1]);
convert without the scale|o.x = E::pack(a.x * scale, a.y * scale);|o.x = E::pack(a.x, a.y * scale);
mul_bt B operand lane offset (both)|            ldsm_x4(tile + lane_off + p * 16 * RB + ks * 32, b0, b1, b2, b3);|            ldsm_x4(tile + lane_off + p * 16 * RB + ks * 16, b0, b1, b2, b3);
dkdv dv_at ignored (dv written at the dv argument)|(dv_at >= 0 ? dk + dv_at : dv) + b * dv_sb|dv + b * dv_sb
dkdv dv stored with dk's row stride|h * dv_sh, dv_sr, c0, Nk, 1.0f, quad);|h * dv_sh, dk_sr, c0, Nk, 1.0f, quad);
dkdv dk stored with dv's head stride|ab_store<E, D>(gk, dk + b * dk_sb + h * dk_sh, dk_sr|ab_store<E, D>(gk, dk + b * dk_sb + h * dv_sh, dk_sr
dkdv dO tile with q's row stride|ab_load_tile<D, BM>(base + buf * 2 * TILE + TILE, dob, do_sr, m0, Nq);|ab_load_tile<D, BM>(base + buf * 2 * TILE + TILE, dob, q_sr, m0, Nq);
dq dO fragments with q's row stride|ab_frag_a<D>(da, dob, do_sr, r0, Nq, quad);|ab_frag_a<D>(da, dob, q_sr, r0, Nq, quad);
dq stored with dO's row stride|ab_store<E, D>(acc, dq + b * g_sb + h * g_sh, g_sr, r0, Nq, scale, quad);|ab_store<E, D>(acc, dq + b * g_sb + h * g_sh, do_sr, r0, Nq, scale, quad);
convert writes dq dense (strides ignored)|*reinterpret_cast<uint2*>(dq + b * g_sb + h * g_sh + row * g_sr + c) = o;|*reinterpret_cast<uint2*>(dq + 4 * i) = o;
LIST
echo "$missed mutation(s) missed or unanchored"
[ "$missed" -eq 0 ]
