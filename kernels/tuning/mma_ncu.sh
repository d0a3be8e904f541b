#!/bin/bash
# Nsight Compute's throughput sections for three bf16 GEMMs at 4096³ on a GPU machine: ours
# (gemm_mma_bf16_nn, committed PTX), NVIDIA's mma.sync kernel (cuBLASLt algo 21, CUTLASS
# 256x128_32x6) and cuBLAS's pick (wgmma). Which unit is nearest its limit (kernels/TUNING.md,
# fifth round). ncu locks the clocks to base.
#   bash kernels/tuning/mma_ncu.sh
set -u
bash kernels/tuning/build_lab.sh || exit 1
sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --metrics lts__t_bytes.sum.per_second,lts__t_sector_hit_rate.pct,sm__inst_executed.sum,sm__cycles_elapsed.avg.per_second"
echo "=== ours"
TC_MIN_M=4096 TC_MAX_M=4096 TC_REPS=1 ncu $sec -k regex:gemm_mma_bf16_nn -c 1 /tmp/tc_lab kernels/ptx gemm_mma_bf16_nn 2>&1 | grep -vE "^==PROF==|^ *-+ *$" | sed -n '/gemm_mma_bf16_nn/,$p'
echo "=== cutlass"
ONLY=21:24:12 ncu $sec --kernel-name-base demangled -k regex:cutlass_80 -c 1 /tmp/cublaslt_algos 4096 4096 4096 2>&1 | grep -vE "^==PROF==|^ *-+ *$" | sed -n '/cutlass_80/,$p'
echo "=== cublas"
HEURISTIC_ONLY=1 HEURISTICS=1 ncu $sec -k regex:sm90 -c 1 /tmp/cublaslt_algos 4096 4096 4096 2>&1 | grep -vE "^==PROF==|^ *-+ *$" | sed -n '/sm90/,$p'
