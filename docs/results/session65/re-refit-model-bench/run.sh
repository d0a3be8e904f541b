#!/bin/bash
# Session 65 run e (one H200): the refitted tile model. attention_bench's bf16 forward with
# PyTorch in the same command (the automatic choice), then the D = 64 forward with the tile chosen
# automatically, forced to 128 and forced to 192, in turn, two rounds (ours only). The bench binary
# was carried alone (run65/bin/ab.tar.xz, a temporary folder, not committed).
set -u
export PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O
tar xJf run65/bin/ab.tar.xz -C /tmp
B=/tmp/attention_bench
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $O/smi.txt 2>&1
timeout 200 $B --filter "sdpa fwd bf16" --torch-run > $O/bench_fwd.txt 2> $O/bench.err; echo "fwd rc=$?"
for r in 1 2; do
  for t in auto 128 192; do
    if [ $t = auto ]; then unset CUDA_STACK_ATTN_FWD_ROWS; else export CUDA_STACK_ATTN_FWD_ROWS=$t; fi
    for s in 16x16x512x64 16x16x1024x64 2x12x4097x64 1x16x4096x64; do
      timeout 60 $B --filter "sdpa fwd bf16 $s" 2>/dev/null | grep -E "^sdpa" | sed "s/^/r$r $t: /" | cut -c1-110 >> $O/tiles.txt
    done
  done
done
grep -E "^sdpa|PASS|MISS" $O/bench_fwd.txt | cut -c1-200
sort -k3,3 -k4,4 $O/tiles.txt | cut -c1-100
