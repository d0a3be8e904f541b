#!/bin/bash
# Builds sgemm_lab.cu on a GPU machine (nvcc; cuBLAS from pip's nvidia-cublas, the one PyTorch
# loads, else the toolkit's), times every candidate beside cuBLAS, then Nsight Compute's launch,
# occupancy, throughput and warp-state sections for cuBLAS's kernel, the library's and the
# candidates named in NCU_ONLY.
#   bash kernels/tuning/sgemm_lab.sh OUTDIR [M N K]...
set -u
out=${1:?OUTDIR}; shift
mkdir -p "$out"
cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1)
[ -n "$cub" ] || cub=$(ls /usr/local/cuda/lib64/libcublas.so.1[0-9]* 2>/dev/null | head -1)
echo "cuBLAS: $cub"
nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/sgemm_lab kernels/tuning/sgemm_lab.cu -ldl \
  > "$out/ptxas.txt" 2>&1 || { tail -30 "$out/ptxas.txt"; exit 1; }
CUBLAS_LIB=$cub /tmp/sgemm_lab "$@" | tee "$out/lab.txt"
if [ -n "${NCU_ONLY:-}" ]; then
  LAB_ONLY="$NCU_ONLY" LAB_REPS=1 LAB_ROUNDS=2 CUBLAS_LIB=$cub \
    ncu -k regex:'gemm|sgl|sgp' --launch-count "${NCU_COUNT:-8}" --section LaunchStats --section Occupancy \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section InstructionStats \
        --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
        /tmp/sgemm_lab 4096 4096 4096 > "$out/ncu.txt" 2>&1
  grep -E '^  [a-z_0-9]+.*\(|Duration|Registers Per|Block Size|Grid Size|Shared Memory Config|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active|No Eligible|Stall|Warp Cycles Per Issued|L1/TEX Hit|Mem Pipes|Bank|issue_stalled_(barrier|long_scoreboard|short_scoreboard|mio_throttle|math_pipe_throttle|not_selected|wait|dispatch_stall|no_instruction|lg_throttle|branch_resolving)_' "$out/ncu.txt" | head -250
fi
