#!/bin/bash
# The wgmma attention backward with each k step's descriptors by one add to the tile's (lab switch
# ABW_DESC_ADD in cuda/attention_wgmma_bwd.cuh, which sets ABW_DESC_ADD_KV, _DQ and _FUSED; the
# forward ships it since session 63, where it made D = 64 0.7-3.3% faster; the ordered one-pass
# kernels also spill less with it). Run in session 63 (quick, then check separately: passed;
# dk/dv faster, dq slower: kernels/TUNING.md). On the GPU machine (nvcc 13.0), from the repository
# root:
#   bash kernels/tuning/attn_bwd_desc_add.sh [OUT] [check]
# Builds both labs, runs `quick` on the new one (and the full `check` when asked), then times both
# in alternation at D = 64 shapes (the lab's `time`: two kernels, one pass, ordered one pass), twice.
set -u
out=${1:-${OUT:-/tmp}}
mkdir -p "$out"
for v in 0 1; do
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DABW_DESC_ADD=$v -o /tmp/attn_bwd_da$v \
    kernels/tuning/attn_wgmma_bwd_lab.cu -lcuda > /tmp/attn_bwd_da_build$v.txt 2>&1 &
done
wait
for v in 0 1; do [ -x /tmp/attn_bwd_da$v ] || { echo "build $v failed"; tail /tmp/attn_bwd_da_build$v.txt; exit 1; }; done
echo "da1 quick: $(timeout 120 /tmp/attn_bwd_da1 quick 2>&1 | tail -1)" | tee -a "$out/time.txt"
if [ "${2:-}" = check ]; then
  timeout 400 /tmp/attn_bwd_da1 check > "$out/check_da1.txt" 2>&1; echo "da1 check rc=$? $(tail -1 "$out/check_da1.txt")" | tee -a "$out/time.txt"
fi
for c in "16 16 1024 64" "2 12 4097 64" "16 16 1024 128"; do
  for r in 1 2; do
    for v in 0 1; do
      # shellcheck disable=SC2086
      timeout 90 /tmp/attn_bwd_da$v time $c 0 > /tmp/attn_bwd_da_t.txt 2>&1
      echo "$c r$r da$v: $(grep -E 'wgmma    dq' /tmp/attn_bwd_da_t.txt | sed 's/^ *//') | $(grep -E '^  (fused|ordered)' /tmp/attn_bwd_da_t.txt | sed 's/^ *//; s/: bwd.*two kernels/ \/ two/' | tr '\n' ' ')" | tee -a "$out/time.txt"
    done
  done
done
