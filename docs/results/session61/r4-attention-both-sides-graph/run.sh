#!/bin/bash
# Session 61 run 4: attention_bench forward and forward+backward, both sides eager and as
# CUDA-graph replays, PyTorch in the same run.
set -u
export PYTHONUNBUFFERED=1
O=$OUT
xz -d .gpu/attention_bench.xz; chmod +x .gpu/attention_bench; A=.gpu/attention_bench
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $O/smi.txt
timeout 280 $A --filter "sdpa fwdbwd bf16" --torch-run > $O/fwdbwd.txt 2>$O/fwdbwd.err; echo "fwdbwd rc=$?"
timeout 200 $A --filter "sdpa fwd bf16" --torch-run > $O/fwd.txt 2>$O/fwd.err; echo "fwd rc=$?"
