#!/bin/bash
# The wgmma attention forward built three ways, timed in one run on a GPU machine (nvcc 13.0):
# the lab built by nvcc (front end and assembler 13.0), the committed NVRTC 12.4 cubin, and the
# committed sm_90a PTX assembled by ptxas 13.0 (what sass/attention_wgmma.sm_90a.cuda13.cubin is).
# From the repository root: bash kernels/tuning/attn_fwd_assemblers.sh   (TUNING.md: "Forward on
# Hopper, third round: the assembler")
set -u
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/fwd_lab kernels/tuning/attn_wgmma_lab.cu -lcuda || exit 1
ptxas -arch=sm_90a kernels/ptx/attention_wgmma.sm90a.ptx -o /tmp/f13.cubin || exit 1
F12=kernels/sass/attention_wgmma.sm_90a.cubin
/tmp/fwd_lab quick --module /tmp/f13.cubin 2>&1 | tail -1
tf() { timeout 60 /tmp/fwd_lab time "$@" 2>&1 | grep -o "[0-9.]* TFLOP/s" | head -1; }
for c in "16 16 512 64" "16 16 1024 64" "16 12 1024 64" "16 16 1024 128" "8 16 2048 128" "4 16 4096 128" "2 12 4097 64"; do
  for z in 0 1; do
    # shellcheck disable=SC2086
    echo "fwd $c c$z: nvcc13=$(tf $c $z) sass12.4=$(tf $c $z --module $F12) ptxas13=$(tf $c $z --module /tmp/f13.cubin)"
  done
done
