#!/bin/bash
# Session 64 run 4 (one H200): why the 192-row forward gained 6% at 16 x 16 x 512 x 64 in the lab
# (run 1) but nothing in attention_bench (run 3). The shipped cubin's kernel is instruction-for-
# instruction nvcc 13.0's (checked here with cuobjdump), so the lab's diagnostics switch the
# library's conditions on one at a time: standard-normal inputs (AW_RANDN), q/k/v in three
# allocations (AW_SEPARATE), buffers from the memory pool (AW_POOL), maps encoded and the limit
# raised at every launch (AW_HOSTWORK), then all four; both tiles in alternation, two rounds.
set -u
O=$OUT; mkdir -p $O
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/l2 kernels/tuning/attn_wgmma_lab.cu -lcuda > /tmp/b2.txt 2>&1 &
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DAW_NC64=3 -o /tmp/l3 kernels/tuning/attn_wgmma_lab.cu -lcuda > /tmp/b3.txt 2>&1 &
wait
for r in 1 2; do
  for e in "X=0" "AW_RANDN=1" "AW_SEPARATE=1" "AW_POOL=1" "AW_HOSTWORK=1" "AW_RANDN=1 AW_SEPARATE=1 AW_POOL=1 AW_HOSTWORK=1"; do
    for v in 2 3; do
      # shellcheck disable=SC2086
      echo "r$r rows$((64 * v)) [$e] $(env $e timeout 60 /tmp/l$v time 16 16 512 64 0 2>&1 | grep '^time')" | tee -a $O/time.txt
    done
  done
done
for c in "16 16 1024 64" "2 12 4097 64"; do
  for v in 2 3; do
    echo "rows$((64 * v)) [all four] $(AW_RANDN=1 AW_SEPARATE=1 AW_POOL=1 AW_HOSTWORK=1 timeout 60 /tmp/l$v time $c 0 2>&1 | grep '^time')" | tee -a $O/time.txt
  done
done
