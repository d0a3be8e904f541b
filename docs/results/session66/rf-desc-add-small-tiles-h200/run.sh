#!/bin/bash
# Session 66 run f (one H200): GWX_DESC_ADD (each k step's wgmma descriptors by one add; measured
# in session 65 on the 128 x 256 kernel only, no gain) on the small tiles, where a k step's
# m64n64 product is 32 tensor cycles against 20-40 instructions between products: the split-K
# lab (every plan of the library's tiles, each against cuBLAS in the same process) built with
# -DGWX_DESC_ADD=0 and =1 (run66/sp_da0, sp_da1, nvcc 13.0), in turn, two rounds, one shape per
# process. One file back.
set -u
O=$OUT
cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1)
for r in 1 2; do
  for s in "1024 1024 8192 nn" "1000 1000 1000 nn" "512 512 16384 nn" "64 4096 4096 nt" "256 256 65536 nn" "4096 4096 4096 nn"; do
    for v in 0 1; do
      echo "== r$r GWX_DESC_ADD=$v $s" >> $O/rf.txt
      CUBLAS_LIB=$cub LAB_ROUNDS=5 timeout 40 run66/sp_da$v $s 2>&1 | grep -E "checks|cuBLAS|s[0-9]+ " >> $O/rf.txt
    done
  done
done
grep -E "==|fastest" $O/rf.txt
