#!/bin/bash
# The one-pass wgmma attention backward with dq's adds in key-tile order (a patch of
# cuda/attention_wgmma_bwd_fused.cu and the lab), checked and timed in a scratch copy (TUNING.md:
# "The one pass under the power cap; its adds in a fixed order"). On the GPU machine (nvcc),
# from the project root:
#   bash kernels/tuning/attn_bwd_ordered.sh PATCH|- [check]
# (`-`: the tree as it is; since session 60 the library has the ordered kernels, v2's design, so
# the v1 / v2 patches no longer apply: they stay as the record of what was measured.)
# Checks first and stops at the first failure or hang (a hung timing run costs its whole timeout):
# `quick`, `quick` on one CTA (ABF_ORD_GRID=1: the waits must end whatever runs at once), reruns
# on 3 CTAs, with `check` the 184-case check; then per shape "fused" (atomic) and "ordered", each
# "/ two kernels", head-by-head and key-tile-major (second build) for full attention.
set -u
patch=${1:?usage: $0 PATCH|- [check]}
deep=${2:-}
root=$(pwd)
w=/tmp/attn_bwd_ordered
rm -rf $w && mkdir -p $w && cp -r kernels $w/ && cd $w || exit 1
if [ "$patch" != - ]; then
  git apply --unsafe-paths --directory=. "$root/$patch" 2>/dev/null || patch -s -p1 < "$root/$patch" || exit 1
fi
build() {  # $1: binary, rest: flags
  local out=$1; shift
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a "$@" -o "$out" kernels/tuning/attn_wgmma_bwd_lab.cu -lcuda
}
build /tmp/ord_lab || exit 1
build /tmp/ord_lab_kt -DABF_ORD_KT_MAJOR=1 -DABF_KT_MAJOR=1 &
step() {  # $1: what, rest: command; stops the script unless it passes
  local what=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  echo "$what rc=$rc: $(echo "$out" | tail -1)"
  [ $rc = 0 ] || { echo "$out" | grep -E "FAIL|HANG" | head -5; wait; exit 1; }
}
step quick timeout 60 /tmp/ord_lab quick
step "quick, one CTA" env ABF_ORD_GRID=1 timeout 60 /tmp/ord_lab quick
step "reruns, 3 CTAs" env ABF_ORD_GRID=3 timeout 60 /tmp/ord_lab rep 16 12 300 300 128 1 2
[ "$deep" = check ] && step check timeout 300 /tmp/ord_lab check
wait
for c in "16 16 512 64" "16 16 1024 64" "16 16 1024 128" "8 16 2048 128" "4 16 4096 128" "1 16 16384 128" \
  "2 12 4097 64"; do
  for causal in 0 1; do
    for lab in /tmp/ord_lab /tmp/ord_lab_kt; do
      [ $causal = 1 ] && [ $lab = /tmp/ord_lab_kt ] && continue  # causal is key-tile-major either way
      out=$(timeout 40 $lab time $c $causal 2>&1)
      echo "$c causal $causal $(basename $lab): $(echo "$out" | grep -E 'fused    |ordered  ' | sed 's/^ *//;s/memset + fused + convert //' | tr '\n' ' ')"
      echo "$out" | grep -q -E "HANG|FAIL" && { echo "$out" | grep -E "HANG|FAIL"; exit 1; }
    done
  done
done
