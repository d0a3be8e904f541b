#!/bin/bash
# Session 63 run 4: the forward with one-add wgmma descriptors (library build): the attention and
# GPT tests, synccheck and racecheck on the forward lab's quick cases of the shipped source,
# attention_bench's bf16 forward cases (then forward + backward) with PyTorch in the same command.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=$OUT; mkdir -p $O/logs
cd .gpu && tar xJf q63.tar.xz && cd ..
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $O/smi.txt
(nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/fwd_ship kernels/tuning/attn_wgmma_lab.cu -lcuda > /tmp/fwd_build.txt 2>&1) &
for t in .gpu/tests/*; do
  n=$(basename $t); t0=$SECONDS
  timeout 120 $t --test-threads 4 > $O/logs/$n.log 2>&1; rc=$?
  printf "%-32s rc=%d %3ds %s\n" $n $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/logs/$n.log | tail -1)" | tee -a $O/summary.txt
done
wait
timeout 60 compute-sanitizer --tool synccheck /tmp/fwd_ship quick > $O/synccheck.txt 2>&1; tail -1 $O/synccheck.txt
timeout 90 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/fwd_ship quick > $O/racecheck.txt 2>&1; tail -1 $O/racecheck.txt
timeout 100 .gpu/attention_bench --filter "sdpa fwd bf16" --torch-run > $O/bench_fwd.txt 2>$O/bench_fwd.err; echo "fwd rc=$?"
grep -E "^sdpa|PASS|MISS|geomean" $O/bench_fwd.txt
