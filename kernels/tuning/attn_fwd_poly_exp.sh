#!/bin/bash
# The wgmma attention forward with some of the softmax's exponentials on the FMA and integer pipes
# (ex2_poly, cuda/ex2.cuh of the patch below) instead of the MUFU: the lab switch AW_POLY_EXP = 0 (shipped), 2, 4, 8
# of each thread's 16 blocks of 8 keys per row (cuda/attention_wgmma.cu). At D = 64 one key tile's
# exponentials take the MUFU (16 a clock per SM) about as long as its two products take the tensor
# cores, and the forward runs at 0.87-0.94x of cuDNN at 512-4096 keys without being power-bound.
# On the GPU machine (nvcc 13.0, ncu), from the repository root:
#   bash kernels/tuning/attn_fwd_poly_exp.sh [OUT]
# Builds the four labs, checks each polynomial build (quick, then the full check: out within 1e-2
# of max|ref|, lse within 1e-5), measures the pipes' use of builds 0 and 4 with ncu at
# 16 x 16 x 1024 x 64, then times all four in alternation at the bench's D = 64 shapes and one
# D = 128 shape, twice. Prepared in session 62, run in session 63: every build slower (TUNING.md).
set -u
out=${1:-${OUT:-/tmp}}
mkdir -p "$out"
# The switch lives in tuning/attn_fwd_softmax_variants.patch (measured and dropped, session 63),
# applied to a copy of the sources.
src=$(bash kernels/tuning/patched_sources.sh attn_fwd_softmax_variants.patch attn_wgmma_lab.cu) || exit 1
V="0 2 4 8"
for v in $V; do
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DAW_POLY_EXP=$v -o /tmp/attn_fwd_p$v \
    "$src/kernels/tuning/attn_wgmma_lab.cu" -lcuda > "$out/build_p$v.txt" 2>&1 &
done
wait
for v in $V; do [ -x /tmp/attn_fwd_p$v ] || { echo "build p$v failed"; tail "$out/build_p$v.txt"; exit 1; }; done
for v in 2 4 8; do
  echo "p$v quick: $(timeout 120 /tmp/attn_fwd_p$v quick 2>&1 | tail -1)"
  timeout 300 /tmp/attn_fwd_p$v check > "$out/check_p$v.txt" 2>&1
  echo "p$v check rc=$? $(tail -1 "$out/check_p$v.txt") (worst: $(grep -c FAIL "$out/check_p$v.txt") FAIL lines)"
done
M='regex:sm__(inst_executed_pipe_(xu|fma|fmaheavy|fmalite|alu)|pipe_tensor_op_(gmma|hmma)_cycles_active|pipe_(fma|alu|xu)_cycles_active)\.avg\.pct_of_peak_sustained_active'
for v in 0 4; do
  AW_ITERS=10 timeout 120 ncu -k regex:attn_fwd --launch-skip 3 --launch-count 1 --metrics "$M,gpu__time_duration.sum" \
    /tmp/attn_fwd_p$v time 16 16 1024 64 0 > "$out/ncu_p$v.txt" 2>&1
  echo "== ncu p$v (rc=$?)"; grep -E "sm__|gpu__time" "$out/ncu_p$v.txt"
done
for c in "16 16 512 64" "16 16 1024 64" "1 16 4096 64" "2 12 4097 64" "16 16 1024 128"; do
  for z in 0 1; do
    for r in 1 2; do
      for v in $V; do
        # shellcheck disable=SC2086
        echo "$c c$z r$r p$v: $(timeout 90 /tmp/attn_fwd_p$v time $c $z 2>&1 | grep '^time')" | tee -a "$out/time.txt"
      done
    done
  done
done
