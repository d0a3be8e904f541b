#!/bin/bash
# Session 61 run 3: attention fwd+bwd settled with each dq path (ours, eager), then Auto and the
# forward with PyTorch (eager and CUDA-graph replay; ours eager only in this build) in the same run.
set -u
export PYTHONUNBUFFERED=1
O=$OUT
xz -d .gpu/attention_bench.xz; chmod +x .gpu/attention_bench; A=.gpu/attention_bench
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $O/smi.txt
for v in separate ordered atomic; do
  timeout 150 $A --filter "sdpa fwdbwd bf16" --bwd-dq $v > $O/fwdbwd_$v.txt 2>&1; echo "$v rc=$?"
done
timeout 240 $A --filter "sdpa fwdbwd bf16" --bwd-dq auto --torch-run > $O/fwdbwd_auto_torch.txt 2>$O/torch_fwdbwd.err
timeout 150 $A --filter "sdpa fwd bf16" --torch-run > $O/fwd_torch.txt 2>$O/torch_fwd.err
