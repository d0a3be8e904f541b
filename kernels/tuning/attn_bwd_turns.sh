#!/bin/bash
# The wgmma attention backward's consumers taking turns at D = 64 in both kernels (dk/dv: the
# shipped ABW_KV_TURNS; dq: tuning/attn_bwd_dq_turns.patch's ABW_DQ_TURNS, applied to a copy of the
# sources) against neither taking turns, in one process each and in alternation. On the GPU
# machine (nvcc 13.0), from the repository root:
#   bash kernels/tuning/attn_bwd_turns.sh [OUT]
# Builds both labs, checks the turns build (quick, then check: every case, reruns' bits), then
# times both at the bench's D = 64 shapes, causal and full, twice. kernels/TUNING.md, sessions 61-62
# (run in session 62: dk/dv faster with turns, dq slower, so only dk/dv ships with them).
set -u
out=${1:-${OUT:-/tmp}}
mkdir -p "$out"
src=$(bash kernels/tuning/patched_sources.sh attn_bwd_dq_turns.patch attn_wgmma_bwd_lab.cu) || exit 1
for v in 0 1; do
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DABW_KV_TURNS=$v -DABW_DQ_TURNS=$v -o /tmp/attn_bwd_t$v \
    "$src/kernels/tuning/attn_wgmma_bwd_lab.cu" -lcuda > "$out/build_t$v.txt" 2>&1 &
done
wait
for v in 0 1; do [ -x /tmp/attn_bwd_t$v ] || { echo "build t$v failed"; tail "$out/build_t$v.txt"; exit 1; }; done
echo "turns quick: $(timeout 120 /tmp/attn_bwd_t1 quick 2>&1 | tail -1)"
timeout 300 /tmp/attn_bwd_t1 check > "$out/check_t1.txt" 2>&1; echo "turns check rc=$? $(tail -1 "$out/check_t1.txt")"
for c in "16 12 1024 64" "16 16 512 64" "16 16 1024 64" "2 12 4097 64"; do
  for z in 0 1; do
    for r in 1 2; do
      for v in 0 1; do
        # shellcheck disable=SC2086
        echo "$c c$z r$r t$v: $(timeout 90 /tmp/attn_bwd_t$v time $c $z 2>&1 | grep 'wgmma    dq')" | tee -a "$out/time.txt"
      done
    done
  done
done
