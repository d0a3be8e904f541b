#!/bin/bash
# The wgmma attention backward's -DABW_* tile variants at D = 64, timed as the crate would ship
# them. On the development machine (NVRTC 12.4 from gen-ptx), make each variant's cubin:
#   bash kernels/tuning/attn_bwd_variants.sh cubins DIR
# then on the GPU machine (nvcc 13.0; DIR carried over), build a lab per variant with the same
# flags (its launch sizes come from them) and time each variant's own cubin through --module:
#   bash kernels/tuning/attn_bwd_variants.sh time DIR
# (TUNING.md: "Backward on Hopper, second round"). "def" is the shipped build.
set -u
declare -A F=(
  [def]="" [no_overlap]="-DABW_KV_OVERLAP=0" [kv128]="-DABW_KV_OVERLAP=0 -DABW_KV_BM64=128 -DABW_KV_STAGES64=4"
  [dq128]="-DABW_DQ_BN64=128" [kv128dq128]="-DABW_KV_OVERLAP=0 -DABW_KV_BM64=128 -DABW_KV_STAGES64=4 -DABW_DQ_BN64=128"
)
mode=${1:-}; dir=${2:-}
[ -n "$mode" ] && [ -n "$dir" ] || { echo "usage: $0 cubins|time DIR" >&2; exit 2; }
case $mode in
cubins)
  mkdir -p "$dir"
  for v in "${!F[@]}"; do
    # shellcheck disable=SC2086
    python3 kernels/tuning/nvrtc12_cubin.py kernels/cuda/attention_wgmma_bwd.cu "$dir/$v.cubin" \
      -std=c++17 -arch=sm_90a -I kernels/cuda ${F[$v]} || exit 1
  done
  cmp -s "$dir/def.cubin" kernels/sass/attention_wgmma_bwd.sm_90a.cubin || echo "note: def.cubin differs from the committed cubin" >&2
  ;;
time)
  for v in "${!F[@]}"; do
    # shellcheck disable=SC2086
    nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a ${F[$v]} -o /tmp/lab_$v kernels/tuning/attn_wgmma_bwd_lab.cu -lcuda &
  done
  wait
  for v in "${!F[@]}"; do echo "$v quick: $(timeout 60 /tmp/lab_$v quick --module "$dir/$v.cubin" 2>&1 | tail -1)"; done
  for c in "16 12 1024 64" "16 16 512 64" "2 12 4097 64"; do
    for z in 0 1; do
      for v in "${!F[@]}"; do
        # shellcheck disable=SC2086
        echo "$c c$z $v: $(timeout 60 /tmp/lab_$v time $c $z --module "$dir/$v.cubin" 2>&1 | grep 'wgmma    dq')"
      done
    done
  done
  ;;
*) echo "usage: $0 cubins|time DIR" >&2; exit 2 ;;
esac
