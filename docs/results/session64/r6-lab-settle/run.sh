#!/bin/bash
# Session 64 run 6 (one H200): is the lab's 4-8% edge over attention_bench at 16 x 16 x 512 x 64
# the bench's 1 s settle (the power cap's clock)? The forward lab with and without AW_SETTLE=1,
# both tiles, two rounds, the SM clock and power sampled every 200 ms alongside. The lab builds
# (nvcc 13.0, here: l2 = 128 rows, l3 = -DAW_NC64=3) were carried as run64/l2, run64/l3.
set -u
O=$OUT; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 200 > $O/smi.txt 2>&1 &
smi=$!
for r in 1 2; do
  for v in 2 3; do
    echo "r$r rows$((64 * v)) no settle: $(timeout 60 run64/l$v time 16 16 512 64 0 2>&1 | grep '^time')" | tee -a $O/time.txt
    echo "r$r rows$((64 * v)) AW_SETTLE=1: $(AW_SETTLE=1 timeout 60 run64/l$v time 16 16 512 64 0 2>&1 | grep '^time')" | tee -a $O/time.txt
  done
done
kill $smi
