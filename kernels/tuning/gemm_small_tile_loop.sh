#!/bin/bash
# The small tiles' main loop (issue 34 item 1, prepared in session 66): under Nsight Compute the
# 128 x 64 persistent kernel keeps the tensor pipe 46% busy at 1024 x 1024 x 8192 where cuBLAS's
# kernel of the same decomposition (128 CTAs in pairs, whole K each) reaches 77%
# (kernels/TUNING.md, "Split-K in pairs sharing A, measured and dropped; ..."). This times, in one
# process per shape against cuBLAS (CUDA-graph replays), the library's 128 x 64 / 128 x 128 /
# 128 x 256 kernels beside the lab's copies that keep 0, 1 or 2 k tiles of products in flight
# (gemm_wgx_cluster_lab.cu, LAB_SMALL=1 LAB_NO_CL=1: `128x64 p0/p1/p2`, `128x128 p0/p1/p2`, and
# `p0 da` / `p2 da` with the descriptors by one add), at
# long-K shapes with one unit per SM and at the mid shapes session 48 measured; then Nsight
# Compute's full set on the 128 x 64 candidates at 1024 x 1024 x 8192.
# On the GPU machine (nvcc 13.0, pip's cuBLAS, ncu), from the repository root:
#   bash kernels/tuning/gemm_small_tile_loop.sh OUT
set -u
out=${1:?OUT}
mkdir -p "$out"
cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1)
echo "cuBLAS: $cub" | tee "$out/loop.txt"
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/gemm_loop_lab \
  kernels/tuning/gemm_wgx_cluster_lab.cu -ldl > /tmp/gemm_loop_build.txt 2>&1 ||
  { echo "build failed"; tail /tmp/gemm_loop_build.txt; exit 1; }
for r in 1 2; do
  for s in "1024 1024 8192" "2048 2048 8192" "1000 1000 1000" "2048 2048 2048" "4096 4096 4096"; do
    echo "== round $r: $s nn" >> "$out/loop.txt"
    # shellcheck disable=SC2086
    LAB_SMALL=1 LAB_NO_CL=1 LAB_ROUNDS=5 CUBLAS_LIB=$cub timeout 60 /tmp/gemm_loop_lab $s nn >> "$out/loop.txt" 2>&1
  done
done
grep -E "==|x cuBLAS|FAIL" "$out/loop.txt"
# Stall reasons too (--print-details all prints the warp-state breakdown), ours and cuBLAS's
# kernel of the same decomposition (through PyTorch: nvjet_sm90_tst_128x64_64x8_1x2 in session 66).
for k in w64p0_nn w64p1_nn w64p2_nn w64p2d_nn; do
  LAB_SMALL=1 LAB_NO_CL=1 LAB_ROUNDS=1 LAB_REPS=2 CUBLAS_LIB=$cub timeout 120 \
    ncu --set full --print-details all -k regex:"^$k\$" -c 1 /tmp/gemm_loop_lab 1024 1024 8192 nn > "$out/ncu_$k.txt" 2>&1
  echo "$k: $(grep -E '^\s+Duration' "$out/ncu_$k.txt" | head -1) $(grep -oE 'Tensor is the highest-utilized pipeline \([0-9.]+%\)' "$out/ncu_$k.txt" | head -1)"
done
cat > /tmp/gemm_loop_mm.py <<'PY'
import torch
a = torch.randn(1024, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
PY
timeout 120 ncu --set full --print-details all -k regex:nvjet -s 1 -c 1 python3 /tmp/gemm_loop_mm.py > "$out/ncu_cublas.txt" 2>&1
echo "cuBLAS: $(grep -E '^\s+Duration' "$out/ncu_cublas.txt" | head -1)"
