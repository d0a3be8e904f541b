#!/bin/bash
# Session 61 run 5: the forward lab (tuning/attn_wgmma_lab.cu, nvcc 13.0) built three ways from
# tuning/attn_fwd_pingpong.patch applied to e487b90's attention_wgmma.cu: -DAW_PINGPONG=0 (the
# shipped order then), 1 (turns of S = Q K^T alone), 2 (a turn = O += P V then the next S);
# variants in alternation, twice per case.
set -u
O=$OUT; L=.gpu
for v in 1 2; do echo "pp$v quick: $(timeout 60 $L/fwd_pp$v quick 2>&1 | tail -1)"; done
for v in 1 2; do timeout 120 $L/fwd_pp$v check > $O/check_pp$v.txt 2>&1; done
for sh in "16 16 512 64" "16 16 1024 64" "2 12 4097 64" "16 16 1024 128" "8 16 2048 128" "4 16 4096 128"; do
  for z in 0 1; do for r in 1 2; do for v in 0 1 2; do
    echo "pp$v r$r $(AW_FEWCHECK=1 AW_RANDN=1 timeout 60 $L/fwd_pp$v time $sh $z 2>&1 | grep -E '^time|FAIL')" | tee -a $O/time.txt
  done; done; done
done
