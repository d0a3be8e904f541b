#!/usr/bin/env bash
# run.sh — the tensor-core attention backward (cuda/attention_mma_bwd.cu: the two-kernel path and
# the fused one) on the CPU: each CUDA thread a fiber, ldmatrix / mma.sync / shuffles emulated per
# warp, shared memory checked for races and early reads of cp.async data (emu.h), results against
# an f64 reference (main.cpp). Needs g++ and python3, no GPU.
#
#   kernels/tuning/attn_emu/run.sh [quick|quick128|full]    (default quick: ~10 s; full: ~2 min)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_SRC:-$here/../../cuda}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 "$here/transform.py" "$cuda/attention_mma_bwd.cu" > "$out/kern.inc"
g++ -std=c++17 -O2 -w -I"$out" -I"$here" -o "$out/emu" "$here/main.cpp"
"$out/emu" "${1:-quick}"
