#!/bin/bash
# Session 66 run a (2 x H200): every test binary of tools/gpu-pack on HEAD 8a06006 (+ nothing), as
# session 65's rc: the long ones on GPU 1 beside the rest on GPU 0, then the two-GPU binaries with
# both visible. Beside them: the attention and GPT tests and the images test again with
# CUDA_STACK_KERNELS_IMAGE=baseline-sass (the NVRTC 12.4 cubins, what CUDA 12 drivers load), and
# the split-K pair lab (kernels/tuning/gemm_splitk_pair_lab.cu, built here) on GPU 0.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O/logs $O/logs_bs
bash .gpu/unpack.sh > $O/unpack.log 2>&1 || { echo unpack failed; tail $O/unpack.log; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $O/smi.txt 2>&1
run_one() {  # name, limit, summary file, log dir
  local t=.gpu/tests/$1 t0=$SECONDS rc res
  timeout $2 $t --test-threads 4 > $4/$1.log 2>&1; rc=$?
  res=$(grep -E "^test result" $4/$1.log | tail -1)
  printf "%-58s rc=%3d %4ds %s\n" "$1" $rc $((SECONDS-t0)) "$res" >> $3
}
MULTI='nccl|peer_access|data_parallel|soundness|multi_tensor|tensor_ops|programs_quick|without_driver'
LONG='attention_ordered|attention_fused|kernels--test--images'
BS='kernels--test--attention$|attention_rows192|attention_layout|attention_tile_order|runtime--test--tensor_attention|nn--test--attention|gpt_model|gpt_training|gpt_parity'
( export CUDA_VISIBLE_DEVICES=1
  for n in $(ls .gpu/tests | grep -E "$LONG"); do run_one $n 280 $O/sum1.txt $O/logs; done
  export CUDA_STACK_KERNELS_IMAGE=baseline-sass
  run_one kernels--test--images 120 $O/sum_bs.txt $O/logs_bs ) &
( export CUDA_VISIBLE_DEVICES=0
  for n in $(ls .gpu/tests | grep -v -E "$LONG|$MULTI"); do run_one $n 120 $O/sum0.txt $O/logs; done
  ( export CUDA_STACK_KERNELS_IMAGE=baseline-sass
    for n in $(ls .gpu/tests | grep -E "$BS"); do run_one $n 120 $O/sum_bs.txt $O/logs_bs; done )
  cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1)
  for s in "512 512 16384 nn" "512 512 16384 nt" "256 256 65536 nn" "256 256 65536 nt" "1024 1024 8192 nn" \
           "64 4096 4096 nt" "1000 1000 1000 nn" "2048 2048 8192 nn" "64 64 131072 nn"; do
    CUBLAS_LIB=$cub timeout 60 run66/splitk_pair $s >> $O/splitk_pair.txt 2>&1 || echo "rc=$? for $s" >> $O/splitk_pair.txt
  done ) &
wait
for n in $(ls .gpu/tests | grep -E "$MULTI"); do run_one $n 120 $O/sum2.txt $O/logs; done
cat $O/sum0.txt $O/sum1.txt $O/sum2.txt > $O/summary.txt
grep -h -E "^test result" $O/logs/*.log | awk '{p+=$4; f+=$6; i+=$8} END {print "TOTAL binaries", NR, "passed",p,"failed",f,"ignored",i}' | tee -a $O/summary.txt
grep -L -E "^test result" $O/logs/*.log | sed 's/^/no result: /' | tee -a $O/summary.txt
grep -v "rc=  0" $O/summary.txt | grep "rc=" | tee -a $O/notok.txt
grep -h -E "^test result" $O/logs_bs/*.log | awk '{p+=$4; f+=$6; i+=$8} END {print "BASELINE-SASS binaries", NR, "passed",p,"failed",f,"ignored",i}' | tee -a $O/sum_bs.txt
cd $O && tar czf logs.tgz logs logs_bs && rm -rf logs logs_bs
