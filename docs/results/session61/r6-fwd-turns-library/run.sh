#!/bin/bash
# Session 61 run 6: the forward with the consumers' turns at D = 64 (the library build): the
# attention and GPT tests, synccheck and racecheck on the lab's quick cases, attention_bench.
set -u
export PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O/logs
cd .gpu && tar xJf q61.tar.xz && cd ..
start=$SECONDS
for t in .gpu/tests/*; do
  n=$(basename $t); t0=$SECONDS
  timeout 90 $t --test-threads 4 > $O/logs/$n.log 2>&1; rc=$?
  printf "%-40s rc=%d %3ds %s\n" $n $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/logs/$n.log | tail -1)" | tee -a $O/summary.txt
done
timeout 60 compute-sanitizer --tool synccheck .gpu/fwd_ship quick > $O/synccheck.txt 2>&1
timeout 90 compute-sanitizer --tool racecheck --racecheck-report hazard .gpu/fwd_ship quick > $O/racecheck.txt 2>&1
timeout 150 .gpu/attention_bench --filter "bf16 16x16x" --torch-run > $O/bench_16.txt 2>$O/bench_16.err
timeout 60 .gpu/attention_bench --filter "bf16 2x12x4097x64" --torch-run > $O/bench_4097.txt 2>$O/bench_4097.err
