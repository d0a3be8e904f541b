#!/bin/bash
# Session 65 run d (2 x H200, the machine of run c still warm). GPU 0: attention_bench's bf16
# forward and forward + backward with PyTorch in the same command. GPU 1: the library's D = 64
# forward with the tile forced to 128, to 192 and chosen automatically, in turn, two rounds (ours
# only); then memcheck on the 192-row tests' reference cases and racecheck / synccheck on the lab's
# quick cases built as shipped (128-row tiles with the skip).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=$OUT; mkdir -p $O
bash .gpu/unpack.sh > /dev/null 2>&1
B=.gpu/bin/attention_bench
( export CUDA_VISIBLE_DEVICES=1
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/fwd128 kernels/tuning/attn_wgmma_lab.cu -lcuda > /tmp/fwd128_build.txt 2>&1 &
  for r in 1 2; do
    for t in 128 192 auto; do
      if [ $t = auto ]; then unset CUDA_STACK_ATTN_FWD_ROWS; else export CUDA_STACK_ATTN_FWD_ROWS=$t; fi
      for s in 16x16x512x64 16x16x1024x64 2x12x4097x64 1x16x4096x64; do
        timeout 60 $B --filter "sdpa fwd bf16 $s" 2>/dev/null | grep -E "^sdpa" | sed "s/^/r$r $t: /" | cut -c1-110 >> $O/tiles.txt
      done
    done
  done
  unset CUDA_STACK_ATTN_FWD_ROWS
  wait
  { echo "== memcheck attention_rows192 reference cases"
    timeout 200 compute-sanitizer --tool memcheck .gpu/tests/kernels--test--attention_rows192 rows192_reference 2>&1 | tail -4
    echo "== memcheck attention wgmma_forward (128-row tiles)"
    timeout 200 compute-sanitizer --tool memcheck .gpu/tests/kernels--test--attention wgmma_forward 2>&1 | tail -4
    echo "== synccheck lab (shipped: 128 rows, skip) quick"
    timeout 90 compute-sanitizer --tool synccheck /tmp/fwd128 quick 2>&1 | tail -2
    echo "== racecheck lab (shipped: 128 rows, skip) quick"
    timeout 150 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/fwd128 quick 2>&1 | tail -2
  } > $O/sanitizers.txt 2>&1 ) &
export CUDA_VISIBLE_DEVICES=0
timeout 170 $B --filter "sdpa fwd bf16" --torch-run > $O/bench_fwd.txt 2> $O/bench.err; echo "fwd rc=$?"
timeout 300 $B --filter "sdpa fwdbwd bf16" --torch-run > $O/bench_fwdbwd.txt 2>> $O/bench.err; echo "fwdbwd rc=$?"
wait
grep -E "^sdpa|PASS|MISS" $O/bench_fwd.txt $O/bench_fwdbwd.txt | cut -c1-200
sort -k3,3 -k4,4 $O/tiles.txt | cut -c1-100
cat $O/sanitizers.txt
