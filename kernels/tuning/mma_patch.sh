#!/bin/bash
# A lab variant of the mma.sync kernel, kept as a patch of kernels/cuda, against the kernel as
# committed, on a GPU machine: both built to PTX by nvcc from source, the variant checked on
# every lab case (fresh random data, output poisoned; again under CHECK_ENV if set), then both
# timed in alternation beside cuBLAS's pick, ROUNDS rounds (default 2). NEW_ENV: environment for
# the variant's runs (e.g. TC_GRID_SMS=1, the grid it is meant to be launched with); LAB_ENV: for
# both timed runs (e.g. "TC_REPS=1000 TC_MAX_M=4096": sustained batches).
#   bash kernels/tuning/mma_patch.sh kernels/tuning/mma_mbarrier.patch
#   NEW_ENV=TC_GRID_SMS=1 CHECK_ENV=TC_GRID=3 bash kernels/tuning/mma_patch.sh kernels/tuning/mma_persistent.patch
# The variants and their figures: kernels/TUNING.md, "mma.sync, fifth round". The three patches
# kept here are against the fifth round's kernel (kernels/cuda as of commit 7c57133) and no
# longer apply to the sixth round's: run them from a checkout of that commit.
set -u
patch_file=$(realpath "$1")
bash kernels/tuning/build_lab.sh || exit 1
w=/tmp/mma_patch && rm -rf $w && mkdir -p $w/src $w/old $w/new && cp -r kernels/cuda $w/src/
(cd $w/src && patch -s -p2 < "$patch_file") || { echo "mma_patch: $1 does not apply to this kernels/cuda (see the note above)" >&2; exit 1; }
for v in old new; do
  src=kernels/cuda; [ $v = new ] && src=$w/src/cuda
  nvcc -ptx -arch=compute_80 -I $src -o $w/$v/gemm_mma.sm80.ptx $src/gemm_mma.cu || exit 1
  cp kernels/ptx/gemm_wgmma.sm90a.ptx $w/$v/
done
echo "=== checks (variant)"; env ${NEW_ENV:-} /tmp/tc_lab $w/new gemm_mma_ 2>&1 | grep -E "FAIL|failures"
if [ -n "${CHECK_ENV:-}" ]; then
  echo "=== checks (variant, $CHECK_ENV)"; env $CHECK_ENV /tmp/tc_lab $w/new gemm_mma_ 2>&1 | grep -E "FAIL|failures"
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for sz in 4096 8192; do HEURISTIC_ONLY=1 HEURISTICS=1 BATCH=5 /tmp/cublaslt_algos $sz $sz $sz; done
  echo "--- committed r$r"; env TC_MIN_M=4095 ${LAB_ENV:-} /tmp/tc_lab $w/old gemm_mma_bf16 2>&1 | grep -E "registers|(4095|4096|8192) |FAIL"
  echo "--- variant r$r";   env TC_MIN_M=4095 ${LAB_ENV:-} ${NEW_ENV:-} /tmp/tc_lab $w/new gemm_mma_bf16 2>&1 | grep -E "registers|(4095|4096|8192) |FAIL"
done
