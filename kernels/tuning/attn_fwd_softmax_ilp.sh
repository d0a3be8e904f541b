#!/bin/bash
# The wgmma attention forward's softmax with shorter dependency chains (lab switch AW_SOFTMAX_ILP,
# cuda/attention_wgmma.cu): 1 = both rows' maxima as trees, their shuffles side by side; 2 = that
# and the row sums in four partial sums. Session 63's Nsight Compute comparison with cuDNN
# (attn_fwd_ncu.sh) found the same launch shape (132 x 384 threads, 168 registers), 15% fewer
# instructions issued a cycle in ours and "fixed latency execution dependency" as its top stall.
# On the GPU machine (nvcc 13.0, ncu, PyTorch), from the repository root:
#   bash kernels/tuning/attn_fwd_softmax_ilp.sh [OUT]
# Builds the three labs (with -lineinfo), checks 1 and 2 (quick, then check), reads the stall
# reasons of 0, 2 and cuDNN's kernel at 16 x 16 x 1024 x 64, the shipped build's stalls by SASS
# line, then times the three in alternation, two rounds. Run in session 63: both slower (TUNING.md).
set -u
out=${1:-${OUT:-/tmp}}
mkdir -p "$out"
src=$(bash kernels/tuning/patched_sources.sh attn_fwd_softmax_variants.patch attn_wgmma_lab.cu) || exit 1
V="0 1 2"
for v in $V; do
  nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90a,code=sm_90a -DAW_SOFTMAX_ILP=$v -o /tmp/attn_fwd_i$v \
    "$src/kernels/tuning/attn_wgmma_lab.cu" -lcuda > /tmp/build_i$v.txt 2>&1 &
done
wait
for v in $V; do [ -x /tmp/attn_fwd_i$v ] || { echo "build i$v failed"; tail /tmp/build_i$v.txt; exit 1; }; done
for v in 1 2; do
  echo "i$v quick: $(timeout 120 /tmp/attn_fwd_i$v quick 2>&1 | tail -1)"
  timeout 300 /tmp/attn_fwd_i$v check > /tmp/check_i$v.txt 2>&1
  echo "i$v check rc=$? $(tail -1 /tmp/check_i$v.txt) ($(grep -c FAIL /tmp/check_i$v.txt) FAIL lines)"
done
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.avg'
{
  for v in 0 2; do
    echo "== ours i$v"
    AW_ITERS=10 timeout 120 ncu -k regex:attn_fwd --launch-skip 3 --launch-count 1 --metrics "$M" \
      /tmp/attn_fwd_i$v time 16 16 1024 64 0 2>&1 | grep -E "smsp__|sm__" | awk '$NF+0 >= 0.02 || /inst_executed|cycles/'
  done
  py=$(ls /opt/torch/.venv/bin/python3 2>/dev/null || command -v python3)
  cat > /tmp/sdpa.py <<'PY'
import torch, torch.nn.functional as F
q, k, v = (torch.randn(16, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(6):
    o = F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
  echo "== cudnn"
  timeout 120 ncu --target-processes all -k regex:'sdpa|fmha|flash|fprop' --launch-skip 2 --launch-count 1 \
    --metrics "$M" "$py" /tmp/sdpa.py 2>&1 | grep -E "smsp__|sm__" | awk '$NF+0 >= 0.02 || /inst_executed|cycles/'
} > "$out/stalls.txt" 2>&1
cat "$out/stalls.txt"
AW_ITERS=10 timeout 150 ncu -k regex:attn_fwd_wgmma_d64 --launch-skip 3 --launch-count 1 --section SourceCounters \
  --section WarpStateStats -o /tmp/src_i0 -f /tmp/attn_fwd_i0 time 16 16 1024 64 0 > /tmp/src_ncu.txt 2>&1
echo "source ncu rc=$?"
ncu -i /tmp/src_i0.ncu-rep --page source --csv --print-source sass > /tmp/sass_i0.csv 2> /tmp/sass_err.txt
echo "source page rc=$? $(wc -l < /tmp/sass_i0.csv) lines"; head -c 600 /tmp/sass_err.txt
xz -T4 -c /tmp/sass_i0.csv > "$out/sass_i0.csv.xz"
for c in "16 16 512 64" "16 16 1024 64" "2 12 4097 64" "16 16 1024 128"; do
  for z in 0 1; do
    for r in 1 2; do
      for v in $V; do
        # shellcheck disable=SC2086
        echo "$c c$z r$r i$v: $(timeout 90 /tmp/attn_fwd_i$v time $c $z 2>&1 | grep '^time')" >> "$out/time.txt"
      done
    done
  done
done
cat "$out/time.txt"
