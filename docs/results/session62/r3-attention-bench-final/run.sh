#!/bin/bash
# Session 62 run 3: the final tree's attention_bench in full with PyTorch (every case), then the
# bf16 forward + backward cases once more, for the spread of the geomean between two runs.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=$OUT
cd .gpu && tar xJf q62.tar.xz attention_bench && cd ..
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $O/smi.txt
timeout 400 .gpu/attention_bench --torch-run > $O/bench_all.txt 2>$O/bench_all.err; echo "all rc=$?"
grep -E "PASS|MISS" $O/bench_all.txt
timeout 170 .gpu/attention_bench --filter "fwdbwd bf16" --torch-run > $O/bench_fwdbwd2.txt 2>$O/bench_fwdbwd2.err; echo "fwdbwd2 rc=$?"
grep -E "PASS|MISS" $O/bench_fwdbwd2.txt
