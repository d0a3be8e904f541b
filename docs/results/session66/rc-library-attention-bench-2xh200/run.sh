#!/bin/bash
# Session 66 run c (2 x H200): the tree with the half key tile peeled out of the forward's loop
# (shipped) and the ordered one pass taken by Auto at D = 128 without a mask from 8192 keys.
# GPU 0: the attention and GPT test binaries (carried as run66/c.tar.xz), attention_ordered with
# the new D = 128 x 8192-key case, memcheck on the forward's tests, racecheck on the 192-row
# reference cases. GPU 1: attention_bench forward with PyTorch in the same command, forward +
# backward at the two D = 128 shapes the rule moved; the hgemm sweep's long-K cases (and the new
# 1024 x 1024 x 8192) with PyTorch; Nsight Compute on cuBLAS's and our 1024 x 1024 x 8192.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O/logs $O/sw
mkdir -p /tmp/c && tar xJf run66/c.tar.xz -C /tmp/c; T=/tmp/c/bin
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $O/smi.txt 2>&1
( export CUDA_VISIBLE_DEVICES=0
  for t in kernels--attention kernels--attention_rows192 kernels--attention_tile_order kernels--attention_layout \
           kernels--images cuda-stack-runtime--tensor_attention cuda-stack-nn--attention examples--gpt_model \
           examples--gpt_training examples--gpt_parity kernels--attention_ordered; do
    t0=$SECONDS; timeout 240 $T/$t --test-threads 4 > $O/logs/$t.log 2>&1; rc=$?
    printf "%-40s rc=%3d %4ds %s\n" $t $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/logs/$t.log | tail -1)" >> $O/summary.txt
  done
  grep -h -E "^test result" $O/logs/*.log | awk '{p+=$4; f+=$6; i+=$8} END {print "TOTAL", NR, "binaries, passed",p,"failed",f,"ignored",i}' >> $O/summary.txt
  { echo "== memcheck attention_rows192 reference cases"
    timeout 100 compute-sanitizer --tool memcheck $T/kernels--attention_rows192 rows192_reference 2>&1 | tail -4
    echo "== memcheck attention wgmma_forward (128-row tiles)"
    timeout 100 compute-sanitizer --tool memcheck $T/kernels--attention wgmma_forward 2>&1 | tail -4
    echo "== racecheck attention_rows192 reference cases"
    timeout $((560 - SECONDS)) compute-sanitizer --tool racecheck --racecheck-report hazard $T/kernels--attention_rows192 rows192_reference 2>&1 | tail -4
  } > $O/sanitizers.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1
  B=$T/examples--attention_bench
  timeout 170 $B --filter "sdpa fwd bf16" --torch-run > $O/bench_fwd.txt 2> $O/bench.err; echo "fwd rc=$?" >> $O/bench.err
  for s in 2x16x8192x128 1x16x16384x128; do
    timeout 90 $B --filter "sdpa fwdbwd bf16 $s" --torch-run >> $O/bench_fwdbwd_d128.txt 2>> $O/bench.err; echo "fwdbwd $s rc=$?" >> $O/bench.err
  done
  K=$T/examples--kernels_bench
  $K --sweep-cases > $O/sw/all.json
  python3 -c "import json,sys; print(json.dumps([c for c in json.load(open(sys.argv[1])) if c['id'].startswith('hgemm') and ('x16384' in c['id'] or 'x65536' in c['id'] or 'x131072' in c['id'] or '1024x1024x8192' in c['id'])]))" $O/sw/all.json > $O/sw/cases.json
  timeout 120 python3 tools/torch_sweep.py $O/sw/cases.json > $O/sw/torch.json 2> $O/sw/torch.err; echo "torch_sweep $?" >> $O/bench.err
  timeout 120 $K --sweep --torch-sweep $O/sw/torch.json --out $O/sw/ours --filter hgemm > $O/sw/sweep.txt 2>&1; echo "sweep $?" >> $O/bench.err
  cat > /tmp/mm.py <<'PY'
import torch
a = torch.randn(1024, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
PY
  timeout 90 ncu --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__cluster_dim_x,dram__bytes_read.sum,lts__t_bytes.sum python3 /tmp/mm.py > $O/ncu_cublas_1024x1024x8192.txt 2>&1
  timeout 90 ncu --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,dram__bytes_read.sum,lts__t_bytes.sum $K --sweep --filter "hgemm bf16 NN 1024x1024x8192" > $O/ncu_ours_1024x1024x8192.txt 2>&1
) &
wait
cat $O/summary.txt $O/sanitizers.txt $O/bench.err
grep -E "^sdpa|PASS|MISS|geomean" $O/bench_fwd.txt $O/bench_fwdbwd_d128.txt | cut -c1-200
grep -E "hgemm" $O/sw/sweep.txt | head -20
grep -E "nvjet|sm90|gemm|Kernel|duration" $O/ncu_cublas_1024x1024x8192.txt | head -30
cd $O && tar czf logs.tgz logs && rm -rf logs
