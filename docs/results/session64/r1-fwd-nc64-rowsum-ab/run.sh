#!/bin/bash
# Session 64 run 1 (one H200): session 63's two prepared forward lab switches, checked and timed
# against the shipped build in alternation (A/B harness): three consumers at D = 64 (AW_NC64=3,
# since shipped as attn_fwd_wgmma_d64_m192_*) and the row sums on the tensor cores
# (AW_ROWSUM_MMA=1, since dropped: wrong results and slower; the code is in commit 2286c1d).
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bash kernels/tuning/attn_fwd_ab.sh $OUT "" "-DAW_ROWSUM_MMA=1" "-DAW_NC64=3" "-DAW_NC64=3 -DAW_ROWSUM_MMA=1" > $OUT/ab.txt 2>&1
tail -80 $OUT/ab.txt
