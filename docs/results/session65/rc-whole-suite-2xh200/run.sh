#!/bin/bash
# Session 65 run c (2 x H200): every test binary of tools/gpu-pack on the tree with the consumers' skip (AW_SKIP) shipped at D = 64. The long ones
# (attention_ordered, attention_fused, images) on GPU 1 beside the rest on GPU 0; then, with both
# GPUs visible, the binaries with two-GPU tests (NCCL, peer access, data-parallel, soundness,
# multi-tensor, tensor ops, programs_quick's train_gpt --gpus 2).
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O/logs
bash .gpu/unpack.sh > $O/unpack.log 2>&1 || { echo unpack failed; tail $O/unpack.log; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $O/smi.txt 2>&1
run_one() {  # name, limit, summary file
  local t=.gpu/tests/$1 t0=$SECONDS rc res
  timeout $2 $t --test-threads 4 > $O/logs/$1.log 2>&1; rc=$?
  res=$(grep -E "^test result" $O/logs/$1.log | tail -1)
  printf "%-58s rc=%3d %4ds %s\n" "$1" $rc $((SECONDS-t0)) "$res" >> $3
}
MULTI='nccl|peer_access|data_parallel|soundness|multi_tensor|tensor_ops|programs_quick|without_driver'
LONG='attention_ordered|attention_fused|kernels--test--images'
( export CUDA_VISIBLE_DEVICES=1
  for n in $(ls .gpu/tests | grep -E "$LONG"); do run_one $n 280 $O/sum1.txt; done ) &
( export CUDA_VISIBLE_DEVICES=0
  for n in $(ls .gpu/tests | grep -v -E "$LONG|$MULTI"); do run_one $n 120 $O/sum0.txt; done ) &
wait
for n in $(ls .gpu/tests | grep -E "$MULTI"); do run_one $n 120 $O/sum2.txt; done
cat $O/sum0.txt $O/sum1.txt $O/sum2.txt > $O/summary.txt
grep -h -E "^test result" $O/logs/*.log | awk '{p+=$4; f+=$6; i+=$8} END {print "TOTAL binaries", NR, "passed",p,"failed",f,"ignored",i}' | tee -a $O/summary.txt
grep -L -E "^test result" $O/logs/*.log | sed 's/^/no result: /' | tee -a $O/summary.txt
grep -v "rc=  0" $O/summary.txt | grep "rc=" | tee -a $O/notok.txt
cd $O && tar czf logs.tgz logs && rm -rf logs
