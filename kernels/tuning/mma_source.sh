#!/bin/bash
# Nsight Compute's per-instruction view (SASS, executed instructions and warp stall samples per
# instruction) of two bf16 GEMMs at 4096³ on a GPU machine: ours (gemm_mma_bf16_nn, committed
# PTX) and NVIDIA's mma.sync kernel (cuBLASLt algo 21, CUTLASS 256x128_32x6), plus each one's
# warp-state and instruction-mix sections. Writes $OUT/{ours,cutlass}.{csv,txt}.
#   OUT=dir bash kernels/tuning/mma_source.sh
set -u
OUT=${OUT:-/tmp/mma_source} && mkdir -p "$OUT"
bash kernels/tuning/build_lab.sh || exit 1
sec="--section WarpStateStats --section InstructionStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis"
TC_MIN_M=4096 TC_MAX_M=4096 TC_REPS=1 ncu $sec -k regex:gemm_mma_bf16_nn -c 1 -o /tmp/ours -f \
    /tmp/tc_lab kernels/ptx gemm_mma_bf16_nn > /dev/null 2>&1
ONLY=21:24:12 ncu $sec --kernel-name-base demangled -k regex:cutlass_80 -c 1 -o /tmp/cutlass -f \
    /tmp/cublaslt_algos 4096 4096 4096 > /dev/null 2>&1
for r in ours cutlass; do
  ncu -i /tmp/$r.ncu-rep --page details > "$OUT/$r.txt" 2>&1
  ncu -i /tmp/$r.ncu-rep --page source --csv --print-source sass > "$OUT/$r.csv" 2>&1
  echo "$r: $(wc -l < "$OUT/$r.csv") source lines"; grep -E "Duration|Executed Instructions |Issue Slots Busy|No Eligible|Active Warps Per|Warp Cycles Per Issued" "$OUT/$r.txt"
done
