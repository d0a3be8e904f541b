#!/bin/bash
# Session 62 run 5: the two example test binaries that run the programs (r4 packed the tests
# without .gpu/bin, so they found no program): programs_quick and without_driver.
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT; mkdir -p $O
cd .gpu && tar xJf p.tar.xz && cd ..
for n in examples--test--programs_quick examples--test--without_driver; do
  t0=$SECONDS; timeout 200 .gpu/tests/$n --test-threads 4 > $O/$n.log 2>&1; rc=$?
  printf "%-58s rc=%3d %4ds %s\n" $n $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/$n.log | tail -1)" | tee -a $O/summary.txt
done
