#!/bin/bash
# Every test binary, 90 s each (the long attention sweeps 240 s), within a BUDGET of seconds.
set -u
export NCCL_NVLS_ENABLE=0
OUTD=${OUT:-/tmp/out}; mkdir -p $OUTD/logs
BUDGET=${BUDGET:-520}
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $OUTD/smi.txt 2>&1
for t in ${TESTS:-.gpu/tests/*}; do
  n=$(basename $t)
  el=$((SECONDS-start))
  if [ $el -gt $BUDGET ]; then echo "$n SKIPPED (budget)" >> $OUTD/summary.txt; continue; fi
  lim=90
  case $n in *attention_ordered*|*attention_fused*) lim=240;; esac
  t0=$SECONDS
  timeout $lim $t --test-threads 4 > $OUTD/logs/$n.log 2>&1; rc=$?
  res=$(grep -E "^test result" $OUTD/logs/$n.log | tail -1)
  printf "%-62s rc=%3d %4ds %s\n" "$n" $rc $((SECONDS-t0)) "$res" >> $OUTD/summary.txt
done
grep -E "^test result" $OUTD/logs/*.log | awk '{p+=$4; f+=$6; i+=$8} END {print "TOTAL passed",p,"failed",f,"ignored",i}' >> $OUTD/summary.txt
grep -l -E "FAILED|panicked" $OUTD/logs/*.log >> $OUTD/summary.txt 2>/dev/null
