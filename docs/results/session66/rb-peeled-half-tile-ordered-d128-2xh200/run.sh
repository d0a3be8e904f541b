#!/bin/bash
# Session 66 run b (2 x H200). GPU 0: the half key tile peeled out of the forward's loop
# (kernels/tuning/aw_half_peeled.patch, prepared in session 65) against the shipped source on the
# 128-row tile, with sanitizers (attn_fwd_ab.sh, builds here with nvcc 13.0). GPU 1: the same on
# the 192-row tile (AW_NC64=3); then attention_bench forward + backward at 2 x 16 x 8192 x 128 and
# 1 x 16 x 16384 x 128 with --bwd-dq ordered and auto in turn, two rounds (ours only); then
# attention_fused (and on GPU 0 attention_ordered) under CUDA_STACK_KERNELS_IMAGE=baseline-sass.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O
bash .gpu/unpack.sh > $O/unpack.log 2>&1 || { echo unpack failed; tail $O/unpack.log; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $O/smi.txt 2>&1
( export CUDA_VISIBLE_DEVICES=0 AB_TAG=a AB_SANITIZE=1
  timeout 400 bash kernels/tuning/attn_fwd_ab.sh $O/peel128 "" "@kernels/tuning/aw_half_peeled.patch" > $O/peel128.log 2>&1
  export CUDA_STACK_KERNELS_IMAGE=baseline-sass
  t0=$SECONDS; timeout 150 .gpu/tests/kernels--test--attention_ordered --test-threads 4 > $O/bs_attention_ordered.log 2>&1; rc=$?
  printf "%-30s rc=%3d %4ds %s\n" attention_ordered $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/bs_attention_ordered.log | tail -1)" >> $O/sum_bs.txt ) &
( export CUDA_VISIBLE_DEVICES=1 AB_TAG=b
  timeout 300 bash kernels/tuning/attn_fwd_ab.sh $O/peel192 "-DAW_NC64=3" "@kernels/tuning/aw_half_peeled.patch -DAW_NC64=3" > $O/peel192.log 2>&1
  for r in 1 2; do for m in ordered auto; do for s in 2x16x8192x128 1x16x16384x128; do
    timeout 60 .gpu/bin/attention_bench --bwd-dq $m --filter "sdpa fwdbwd bf16 $s" 2>/dev/null | grep -E "^sdpa" | sed "s/^/r$r $m: /" | cut -c1-120 >> $O/ordered.txt
  done; done; done
  export CUDA_STACK_KERNELS_IMAGE=baseline-sass
  for n in attention_fused; do
    t0=$SECONDS; timeout 200 .gpu/tests/kernels--test--$n --test-threads 4 > $O/bs_$n.log 2>&1; rc=$?
    printf "%-30s rc=%3d %4ds %s\n" $n $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/bs_$n.log | tail -1)" >> $O/sum_bs.txt
  done ) &
wait
tail -4 $O/peel128.log $O/peel192.log; cat $O/ordered.txt $O/sum_bs.txt
