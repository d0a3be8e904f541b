#!/bin/bash
# Session 64 run 3 (2 x H200, the machine of run 2 still warm): attention_bench's bf16 forward and
# forward + backward with PyTorch in the same command on GPU 0, the forward again with the 128-row
# tile forced (CUDA_STACK_ATTN_FWD_ROWS=128: the tile choice's effect in one run); meanwhile on
# GPU 1 the sanitizers: memcheck on the 192-row tests' reference cases, and synccheck / racecheck on
# the forward lab's quick cases built for the 192-row kernels (the lab includes the shipped source);
# first the rebuilt 192-row tests themselves.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=$OUT; mkdir -p $O
bash .gpu/unpack.sh > /dev/null 2>&1
# The 192-row tests rebuilt after run 2 (their padded-layout cases asked the wgmma kernels for
# unaligned views, which they refuse): packed apart, unpacked over run 2's build.
tar xJf .gpu/fix.tar.xz -C .gpu/tests
B=.gpu/bin/attention_bench
( export CUDA_VISIBLE_DEVICES=1
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DAW_NC64=3 -o /tmp/fwd192 kernels/tuning/attn_wgmma_lab.cu -lcuda > /tmp/fwd192_build.txt 2>&1
  { echo "== attention_rows192"
    timeout 120 .gpu/tests/kernels--test--attention_rows192 --test-threads 4 2>&1 | tail -3
    echo "== memcheck rows192_reference_bf16"
    timeout 240 compute-sanitizer --tool memcheck .gpu/tests/kernels--test--attention_rows192 rows192_reference_bf16 2>&1 | tail -4
    echo "== synccheck lab (AW_NC64=3) quick"
    timeout 90 compute-sanitizer --tool synccheck /tmp/fwd192 quick 2>&1 | tail -2
    echo "== racecheck lab (AW_NC64=3) quick"
    timeout 150 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/fwd192 quick 2>&1 | tail -2
  } > $O/sanitizers.txt 2>&1 ) &
export CUDA_VISIBLE_DEVICES=0
timeout 150 $B --filter "sdpa fwd bf16" --torch-run > $O/bench_fwd.txt 2> $O/bench.err; echo "fwd rc=$?"
CUDA_STACK_ATTN_FWD_ROWS=128 timeout 80 $B --filter "sdpa fwd bf16" > $O/bench_fwd_rows128.txt 2>> $O/bench.err; echo "fwd rows128 rc=$?"
timeout 240 $B --filter "sdpa fwdbwd bf16" --torch-run > $O/bench_fwdbwd.txt 2>> $O/bench.err; echo "fwdbwd rc=$?"
wait
grep -E "^sdpa|PASS|MISS" $O/bench_fwd.txt $O/bench_fwd_rows128.txt $O/bench_fwdbwd.txt | cut -c1-200
cat $O/sanitizers.txt
