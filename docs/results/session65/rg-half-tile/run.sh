#!/bin/bash
# Session 65 run g (one H200): AW_HALF, prepared this session: a consumer whose rows see at most
# the first 64 keys of its last key tile multiplies only those (1: O += P V over 4 k steps instead
# of 8; 2: also S = Q K^T as m64n64k16). Lab binaries built locally with nvcc 13.0
# (run65/lab/half{0,1,2}, the shipped kernels with -DAW_HALF=0/1/2). Each checked (quick, check),
# then timed in turn after the 1 s settle.
set -u
O=$OUT; mkdir -p $O
L=run65/lab
for v in 1 2; do
  echo "v$v quick: $(timeout 60 $L/half$v quick 2>&1 | tail -1)" | tee -a $O/g.txt
  timeout 150 $L/half$v check > $O/check$v.txt 2>&1
  echo "v$v check rc=$? $(tail -1 $O/check$v.txt) ($(grep -c FAIL $O/check$v.txt) FAIL lines)" | tee -a $O/g.txt
done
for c in "16 16 1024 64 1" "16 16 512 64 1" "16 16 1024 128 1" "2 12 4097 64 1" "16 16 1024 128 0"; do
  for v in 0 1 2; do
    echo "$c v$v: $(AW_SETTLE=1 timeout 60 $L/half$v time $c 2>&1 | grep '^time')" | tee -a $O/g.txt
  done
done
