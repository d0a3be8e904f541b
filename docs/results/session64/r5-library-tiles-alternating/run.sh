#!/bin/bash
# Session 64 run 5 (one H200): the library's forward at D = 64 with the tile forced each way, in
# alternation, nothing else on the machine: attention_bench (ours only) at 16 x 16 x {512, 1024}
# (D = 64 and 128, full and causal), 128 rows then the automatic choice, three rounds. The
# bench binary was carried alone, as run64/bin/ab.tar.xz (a temporary folder, not committed).
set -u
O=$OUT; mkdir -p $O
tar xJf run64/bin/ab.tar.xz -C /tmp
for r in 1 2 3; do
  for t in 128 auto; do
    if [ $t = auto ]; then unset CUDA_STACK_ATTN_FWD_ROWS; else export CUDA_STACK_ATTN_FWD_ROWS=$t; fi
    /tmp/attention_bench --filter "sdpa fwd bf16 16x16x" 2>/dev/null | grep -E "^sdpa" | sed "s/^/r$r $t: /" | cut -c1-110 | tee -a $O/time.txt
  done
done
