#!/bin/bash
# Session 62 run 2: the backward's dk/dv consumers take turns at D = 64 (library build): the
# attention and GPT tests (attention_ordered beside them), synccheck and racecheck on the backward
# lab's quick cases, attention_bench fwd + bwd (every bf16 case) with PyTorch.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=$OUT; mkdir -p $O/logs
cd .gpu && tar xJf q62.tar.xz && cd ..
(timeout 300 .gpu/tests/kernels--attention_ordered > $O/logs/kernels--attention_ordered.log 2>&1; echo "ordered rc=$?" > $O/ordered_rc.txt) &
for t in .gpu/tests/*; do
  n=$(basename $t); [ $n = kernels--attention_ordered ] && continue; t0=$SECONDS
  timeout 120 $t --test-threads 4 > $O/logs/$n.log 2>&1; rc=$?
  printf "%-40s rc=%d %3ds %s\n" $n $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/logs/$n.log | tail -1)" | tee -a $O/summary.txt
done
timeout 90 compute-sanitizer --tool synccheck .gpu/bwd_ship quick > $O/synccheck.txt 2>&1; tail -2 $O/synccheck.txt
timeout 120 compute-sanitizer --tool racecheck --racecheck-report hazard .gpu/bwd_ship quick > $O/racecheck.txt 2>&1; tail -2 $O/racecheck.txt
wait
cat $O/ordered_rc.txt; grep -E '^test result' $O/logs/kernels--attention_ordered.log | tee -a $O/summary.txt
timeout 280 .gpu/attention_bench --filter "fwdbwd bf16" --torch-run > $O/bench.txt 2>$O/bench.err
tail -25 $O/bench.txt
