#!/bin/bash
# Session 61 run 1 (2 x H200): the owed suite of e487b90, the long attention tests on GPU 1 beside
# it, and the bulk-store epilogue lab (base vs bulk) on GPU 0 first.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O/long $O/lab
bash .gpu/unpack.sh > $O/unpack.log 2>&1 || { echo unpack failed; tail $O/unpack.log; }
ls .gpu/tests | wc -l
cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1); echo "cublas $cub"
# GPU 1: the long attention tests in full, then the tensor_linear_grad seed
( export CUDA_VISIBLE_DEVICES=1
  for n in kernels--test--attention_ordered kernels--test--attention_fused; do
    t0=$SECONDS; timeout 280 .gpu/tests/$n --test-threads 4 > $O/long/$n.log 2>&1
    echo "$n rc=$? $((SECONDS-t0))s $(grep -E '^test result' $O/long/$n.log)" >> $O/long/summary.txt
  done
  f=$(ls .gpu/tests/ | grep tensor_linear_grad | head -1)
  BGRAD_TEST_SEED=1795971546267628499 timeout 60 .gpu/tests/$f f16_on_cublas --nocapture > $O/long/linear_grad_seed.log 2>&1
  echo "linear_grad seed rc=$? $(grep -E '^test result' $O/long/linear_grad_seed.log)" >> $O/long/summary.txt
) &
bg=$!
# GPU 0: the lab, base then bulk, twice alternated
shapes="8192 8192 64 nt 8192 8192 128 nn 8192 8192 32 nn 4096 4096 64 nn 2048 2048 512 nn 1024 4096 1024 nn 8192 768 3072 nn 4096 4096 4096 nn"
for r in 1 2; do for v in base bulk; do
  CUDA_VISIBLE_DEVICES=0 LAB_SMALL=1 LAB_NO_CL=1 LAB_ROUNDS=7 CUBLAS_LIB=$cub timeout 100 .gpu/lab/wgx_$v $shapes > $O/lab/$v-$r.txt 2>&1
  echo "lab $v $r rc=$?"
done; done
TESTS="$(ls -d .gpu/tests/* | grep -v -E 'attention_ordered|attention_fused')" BUDGET=330 bash .gpu/suite61.sh
wait $bg
cat $O/long/summary.txt
tail -4 $O/summary.txt
cd $O && tar czf logs.tgz logs long/*.log && rm -rf logs long/*.log
