#!/bin/bash
# Session 62 run 1 (the device command, one line there): the two test cases of d721b63 never run
# (a dq workspace too short), plain and under memcheck, then kernels/tuning/attn_bwd_turns.sh as of
# d721b63 (built with -DABW_TURNS=0 and 1: the switch since split into ABW_KV_TURNS/ABW_DQ_TURNS).
cd .gpu && tar xJf t.tar.xz && cd .. && export NCCL_NVLS_ENABLE=0
(.gpu/bin/attention_ordered ordered_misfits 2>&1 | tail -4; .gpu/bin/attention_fused misfits 2>&1 | tail -4
 compute-sanitizer --tool memcheck .gpu/bin/attention_fused misfits 2>&1 | tail -3
 compute-sanitizer --tool memcheck .gpu/bin/attention_ordered ordered_misfits 2>&1 | tail -3) | tee $OUT/tests.txt
timeout 420 bash kernels/tuning/attn_bwd_turns.sh $OUT 2>&1 | tail -40
