#!/bin/bash
# Session 62 run 6 (2 x H200): the five binaries whose two-GPU tests r4 ran with one GPU visible.
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT
cd .gpu && tar xJf m.tar.xz && cd ..
for n in soundness soundness_devices soundness_guards multi_tensor tensor_ops; do
  t0=$SECONDS; timeout 120 .gpu/tests/$n --test-threads 4 > $O/$n.log 2>&1; rc=$?
  printf "%-20s rc=%3d %4ds %s\n" $n $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/$n.log | tail -1)" | tee -a $O/summary.txt
done
