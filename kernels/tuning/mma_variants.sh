#!/bin/bash
# gemm_mma variants on a GPU machine (nvcc, no Rust): each built to PTX with other -D values from
# kernels/cuda/gemm_mma.cu, ptxas -v for its registers / spills on sm_90, then checked and timed by
# tc_lab beside the committed PTX (kernels/ptx) in the same command. kernels/TUNING.md has the runs.
#
#   bash kernels/tuning/mma_variants.sh
set -u
nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/tc_lab kernels/tuning/tc_lab.cu -lcuda || exit 1
build() {  # name, nvcc flags...
  local n=$1; shift
  mkdir -p /tmp/v/$n
  cp kernels/ptx/gemm_wgmma.sm90a.ptx /tmp/v/$n/
  nvcc -ptx -arch=compute_80 -I kernels/cuda "$@" -o /tmp/v/$n/gemm_mma.sm80.ptx kernels/cuda/gemm_mma.cu || return 1
  echo "--- $n $*"
  ptxas -arch=sm_90 -v /tmp/v/$n/gemm_mma.sm80.ptx -o /dev/null 2>&1 \
    | grep -A4 "entry function 'gemm_mma_bf16_nn'" | grep -E "spill|registers"
}
run() {  # dir, env...
  local d=$1; shift
  echo "=== $d $*"
  env "$@" /tmp/tc_lab "$d" gemm_mma_bf16 2>&1 \
    | grep -E "registers|gemm_mma_bf16_(nn|nt|tn|tt) +(4096|8192)|FAIL|failures"
}
# Round 3 (fragment addresses as registers + constants, k tiles unrolled by stage): the same
# source built by nvcc beside the committed (NVRTC 12.4) PTX, then the variants.
build same
# The TMA-fed lab variant, beside the shipped kernels' PTX.
mkdir -p /tmp/v/tma && cp kernels/ptx/gemm_mma.sm80.ptx kernels/ptx/gemm_wgmma.sm90a.ptx /tmp/v/tma/
nvcc -ptx -arch=compute_90 -I kernels/cuda -o /tmp/v/tma/gemm_mma_tma.sm90.ptx kernels/tuning/gemm_mma_tma.cu || exit 1
/tmp/tc_lab /tmp/v/tma gemm_mma 2>&1 | grep -E "FAIL|failures|(4096|8192) +\|"
build stages4 -DMM_STAGES=4
for r in 1 2; do
  run kernels/ptx
  run /tmp/v/same
  run /tmp/v/stages4 MM_STAGES=4
done
# (Also tried in round 3 and dropped, TUNING.md: MM_INTERLEAVE, the next step's ldmatrix spread
# between this step's MMAs in groups of 8: within noise.)
# Round 2 (kernels/TUNING.md "mma.sync, second round"; the MM_BK variants predate MmFragAddr, which needs MM_BK = 64):
#   build bk128s2 -DMM_BK=128 -DMM_STAGES=2; build bn128 -DMM_BN=128 -DMM_MIN_BLOCKS=2
#   build bn128k32s4 -DMM_BN=128 -DMM_MIN_BLOCKS=2 -DMM_BK=32 -DMM_STAGES=4; build bk32s4 -DMM_BK=32 -DMM_STAGES=4
#   run /tmp/v/bk128s2 MM_BK=128 MM_STAGES=2; run /tmp/v/bn128 MM_BN=128 MM_CARVEOUT=100 ...
