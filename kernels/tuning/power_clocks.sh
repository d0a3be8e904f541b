#!/bin/bash
# SM clock, power and the driver's clock-event reasons while tensor-core GEMMs run back to back:
# our mma.sync kernel (tc_lab, committed PTX), NVIDIA's mma.sync kernel (cuBLASLt algo 21, the
# CUTLASS 256x128_32x6 kernel) and cuBLAS's own pick (wgmma), each in short batches (5 calls per
# timed sample) and sustained ones (seconds of back-to-back calls), then the two Rust programs.
# nvidia-smi samples every 20 ms; tools/power_phases.py averages the samples per phase.
# Why: kernels_bench and tensor_cores disagreed on mma.sync's ratio to cuBLAS; under the 700 W
# limit each kernel gets its own clock (kernels/TUNING.md, "mma.sync, fifth round").
#
#   OUT=dir bash kernels/tuning/power_clocks.sh      (on a GPU machine, after .gpu/unpack.sh)
set -u
out=${OUT:-/tmp/power}; mkdir -p "$out"
bash kernels/tuning/build_lab.sh || exit 1
reasons=clocks_event_reasons.active
nvidia-smi --help-query-gpu | grep -q "$reasons" || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,enforced.power.limit,temperature.gpu,$reasons \
    --format=csv,noheader,nounits -lms 20 > "$out/smi.csv" &
smi=$!
mark() { echo "$(date '+%Y/%m/%d %H:%M:%S.%3N') $*" >> "$out/marks.txt"; echo "=== $*"; }
phase() {  # name, command...
    local n=$1; shift
    mark "begin $n"; "$@"; mark "end $n"
}
sleep 2
phase idle sleep 2
for round in 1 2; do
  for size in 4096 8192; do
    for batch in 5 long; do
      reps=$batch; [ "$batch" = long ] && { [ $size = 4096 ] && reps=1000 || reps=150; }
      phase "ours $size x$reps r$round" env TC_MIN_M=$size TC_MAX_M=$size TC_REPS=$reps \
          /tmp/tc_lab kernels/ptx gemm_mma_bf16_nn
      sleep 1
      phase "cutlass $size x$reps r$round" env ONLY=21:24:12 BATCH=$reps /tmp/cublaslt_algos $size $size $size
      sleep 1
      phase "cublas $size x$reps r$round" env HEURISTIC_ONLY=1 HEURISTICS=1 BATCH=$reps \
          /tmp/cublaslt_algos $size $size $size
      sleep 1
    done
  done
done
phase tensor_cores .gpu/bin/tensor_cores > "$out/tensor_cores.txt" 2>&1
sleep 1
phase kernels_bench .gpu/bin/kernels_bench --out "$out/bench" > "$out/kernels_bench.txt" 2>/dev/null
grep -E "tensor|mma|wgmma|cuBLAS" "$out/kernels_bench.txt" | grep -E "PASS|MISS" 
kill $smi
python3 tools/power_phases.py "$out/smi.csv" "$out/marks.txt" | tee "$out/phases.txt"
