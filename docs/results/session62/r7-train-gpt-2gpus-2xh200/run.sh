#!/bin/bash
# Session 62 run 7 (2 x H200): programs_quick's two-GPU case (train_gpt --gpus 2 --quick), ignored
# in r5 (one GPU). Output: test train_gpt --config gpt2-124m --gpus 2 --quick ... ok;
# test result: ok. 1 passed; 0 failed; 0 ignored; 44 filtered out; finished in 5.12s
cd .gpu && tar xJf g.tar.xz && cd .. && export NCCL_NVLS_ENABLE=0
timeout 150 .gpu/tests/examples--test--programs_quick "gpus 2" 2>&1 | tail -5
