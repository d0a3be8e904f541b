#!/bin/bash
# Session 65 run b (2 x H200): GPU 0: AW_SKIP on the 192-row tile (AW_NC64=3), with sanitizers.
# GPU 1: AW_SKIP on the 128-row tile, then the GEMMs' GWX_DESC_ADD against cuBLAS.
set -u
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $OUT/smi.txt 2>&1
( export CUDA_VISIBLE_DEVICES=0 AB_TAG=a AB_SANITIZE=1
  timeout 560 bash kernels/tuning/attn_fwd_ab.sh $OUT/ab192 "-DAW_NC64=3" "-DAW_NC64=3 -DAW_SKIP=1" > $OUT/ab192.log 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 AB_TAG=b
  timeout 300 bash kernels/tuning/attn_fwd_ab.sh $OUT/ab128 "" "-DAW_SKIP=1" > $OUT/ab128.log 2>&1
  LAB_ROUNDS=2 timeout 250 bash kernels/tuning/gemm_wgx_desc_add.sh $OUT/gwx > $OUT/gwx.log 2>&1 ) &
wait
tail -5 $OUT/ab192.log $OUT/ab128.log $OUT/gwx.log
