#!/bin/bash
# The one-pass wgmma attention backward (cuda/attention_wgmma_bwd_fused.cu) beside the two
# kernels, in the lab harness (TUNING.md: "Backward on Hopper, third round"). On the GPU machine
# (nvcc), from the project root:
#   bash kernels/tuning/attn_bwd_fused_variants.sh variants  # A: named barriers + row-by-row
#                                                            # reductions, B: mbarrier hand-off,
#                                                            # C: B + one reduction a tile (shipped),
#                                                            # D: A + one reduction a tile
#   bash kernels/tuning/attn_bwd_fused_variants.sh skip      # where the time goes: -DABF_LAB_SKIP=0..3
#   bash kernels/tuning/attn_bwd_fused_variants.sh shipped   # the committed NVRTC 12.4 cubins of both
#                                                            # paths (--module, --fused-module)
# Each prints, per shape, "fused ... / two kernels" (memset + one pass + convert ÷ dq + dk/dv).
set -u
mode=${1:-}
declare -A F
case $mode in
variants) F=([A]="-DABF_MBAR_SYNC=0 -DABF_DQ_PAD=32" [B]="-DABF_MBAR_SYNC=1 -DABF_DQ_PAD=32" [C]="" [D]="-DABF_MBAR_SYNC=0") ;;
skip) F=([skip0]="" [skip1]="-DABF_LAB_SKIP=1" [skip2]="-DABF_LAB_SKIP=2" [skip3]="-DABF_LAB_SKIP=3") ;;
shipped) F=([shipped]="") ;;
*) echo "usage: $0 variants|skip|shipped" >&2; exit 2 ;;
esac
for v in "${!F[@]}"; do
  # shellcheck disable=SC2086
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a ${F[$v]} -o /tmp/fused_lab_$v \
    kernels/tuning/attn_wgmma_bwd_lab.cu -lcuda &
done
wait
mods=()
[ "$mode" = shipped ] && mods=(--module kernels/sass/attention_wgmma_bwd.sm_90a.cubin
  --fused-module kernels/sass/attention_wgmma_bwd_fused.sm_90a.cubin)
for v in "${!F[@]}"; do echo "$v quick: $(timeout 120 /tmp/fused_lab_$v quick "${mods[@]}" 2>&1 | tail -1)"; done
for c in "16 12 1024 64 0" "16 12 1024 64 1" "16 16 1024 128 0" "16 16 1024 128 1" "8 16 2048 128 0" \
  "8 16 2048 128 1" "4 16 4096 128 0" "4 16 4096 128 1" "2 12 4097 64 0" "2 12 4097 64 1"; do
  for v in "${!F[@]}"; do
    # shellcheck disable=SC2086
    echo "$c $v: $(timeout 60 /tmp/fused_lab_$v time $c "${mods[@]}" 2>&1 | grep -E 'fused    |HANG' | sed 's/^ *//')"
  done
done
