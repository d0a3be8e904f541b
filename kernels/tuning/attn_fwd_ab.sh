#!/bin/bash
# Lab builds of the wgmma attention forward (tuning/attn_wgmma_lab.cu) that differ only by -D
# switches, checked and then timed in alternation: the A/B harness for a lab switch.
# On the GPU machine (nvcc 13.0), from the repository root:
#   bash kernels/tuning/attn_fwd_ab.sh OUT "-DX=0" "-DX=1" [...]
# A variant "@PATCH [-D...]" is the lab built with PATCH applied to a copy of kernels/cuda (e.g.
# "@kernels/tuning/aw_half_peeled.patch").
# Every build but the first runs `quick` and the full `check` (and, with AB_SANITIZE=1, `quick`
# under memcheck, synccheck and racecheck); the timing goes over the bench's D = 64 shapes and one D = 128
# shape, full and causal, two rounds, variants in turn, each after attention_bench's 1 s settle
# (AW_SETTLE; AB_SETTLE=0 times before the power cap lowers the clock, as sessions 63 and 64's
# first run did, which favoured the variant doing more work a second).
set -u
out=$1; shift
# AB_TAG names the binaries (/tmp/attn_ab${AB_TAG}N) so that two runs can share a machine, one a GPU.
t=${AB_TAG:-}
mkdir -p "$out"
n=0
for f in "$@"; do
  # A variant "@FILE [-D...]" builds the lab from a copy of kernels/cuda with the patch FILE applied.
  lab=kernels/tuning/attn_wgmma_lab.cu flags=$f
  if [[ $f == @* ]]; then
    p=${f%% *} flags=${f#"${f%% *}"}
    d=/tmp/attn_ab_src$t$n
    rm -rf "$d" && mkdir -p "$d/kernels" && cp -r kernels/cuda kernels/tuning "$d/kernels/"
    pf=$(realpath "${p#@}")
    (cd "$d" && git apply -p1 "$pf") || patch -s -p1 -d "$d" < "$pf" || { echo "patch $pf failed"; exit 1; }
    lab=$d/kernels/tuning/attn_wgmma_lab.cu
  fi
  # shellcheck disable=SC2086
  nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a $flags -o /tmp/attn_ab$t$n "$lab" \
    -lcuda > /tmp/attn_ab_build$t$n.txt 2>&1 &
  n=$((n + 1))
done
wait
for ((i = 0; i < n; i++)); do
  [ -x /tmp/attn_ab$t$i ] || { echo "build $i failed"; tail /tmp/attn_ab_build$t$i.txt; exit 1; }
done
for ((i = 1; i < n; i++)); do
  echo "v$i quick: $(timeout 120 /tmp/attn_ab$t$i quick 2>&1 | tail -1)"
  timeout 300 /tmp/attn_ab$t$i check > /tmp/attn_ab_check$t$i.txt 2>&1
  echo "v$i check rc=$? $(tail -1 /tmp/attn_ab_check$t$i.txt) ($(grep -c FAIL /tmp/attn_ab_check$t$i.txt) FAIL lines)"
  if [ "${AB_SANITIZE:-0}" = 1 ]; then
    echo "v$i memcheck: $(timeout 120 compute-sanitizer --tool memcheck /tmp/attn_ab$t$i quick 2>&1 | tail -1)"
    echo "v$i synccheck: $(timeout 120 compute-sanitizer --tool synccheck /tmp/attn_ab$t$i quick 2>&1 | tail -1)"
    echo "v$i racecheck: $(timeout 180 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/attn_ab$t$i quick 2>&1 | tail -1)"
  fi
done
i=0; for f in "$@"; do echo "v$i = $f"; i=$((i + 1)); done | tee "$out/time.txt"
for c in "16 16 512 64" "16 16 1024 64" "2 12 4097 64" "16 16 1024 128"; do
  for z in 0 1; do
    for r in 1 2; do
      for ((i = 0; i < n; i++)); do
        # shellcheck disable=SC2086
        echo "$c c$z r$r v$i: $(AW_SETTLE=${AB_SETTLE:-1} timeout 90 /tmp/attn_ab$t$i time $c $z 2>&1 | grep '^time')" >> "$out/time.txt"
      done
    done
  done
done
cat "$out/time.txt"
