#!/bin/bash
# The persistent Hopper GEMMs (cuda/gemm_wgmma_tiles.cu) with each k step's wgmma descriptors by
# one add to the stage's (lab switch GWX_DESC_ADD, 0 shipped), as the attention kernels do since
# sessions 63-64: prepared in session 64, not yet run. In the 128 x 128 nn kernel (ptxas 13.0)
# a k tile's instructions from the stage's barrier to the wait for its products go from 69 to 48
# (31 to 26 before the first HGMMA); each k tile waits for its products (wait_group 0), so they
# sit between one k tile's products and the next's (the other consumer's products overlap them).
# On the GPU machine (nvcc 13.0, pip's cuBLAS), from the repository root:
#   bash kernels/tuning/gemm_wgx_desc_add.sh OUT [M N K layout]...
# Builds gemm_wgx_cluster_lab.cu both ways and runs each (LAB_NO_CL=1: the library's kernels
# against cuBLAS in CUDA-graph replays, LAB_ROUNDS rounds) over the shapes, the two builds in
# turn, twice: compare each build's ratio to cuBLAS, taken in its own process.
set -u
out=${1:?OUT}; shift
mkdir -p "$out"
cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1)
[ -n "$cub" ] || cub=$(ls /usr/local/cuda/lib64/libcublas.so.1[0-9]* 2>/dev/null | head -1)
echo "cuBLAS: $cub" | tee "$out/lab.txt"
for v in 0 1; do
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DGWX_DESC_ADD=$v -o /tmp/gwx_da$v \
    kernels/tuning/gemm_wgx_cluster_lab.cu -ldl > /tmp/gwx_da_build$v.txt 2>&1 &
done
wait
for v in 0 1; do [ -x /tmp/gwx_da$v ] || { echo "build $v failed"; tail /tmp/gwx_da_build$v.txt; exit 1; }; done
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(4096 4096 4096 nn 8192 8192 8192 nn 1000 1000 1000 nn 33 4096 4096 nn
  4095 4097 1023 nt 2048 2048 16384 nn)
for r in 1 2; do
  for v in 0 1; do
    echo "== round $r, GWX_DESC_ADD=$v" | tee -a "$out/lab.txt"
    LAB_NO_CL=1 LAB_ROUNDS=${LAB_ROUNDS:-3} CUBLAS_LIB=$cub timeout 240 /tmp/gwx_da$v "${shapes[@]}" 2>&1 | tee -a "$out/lab.txt"
  done
done
