#!/bin/bash
# Nsight Compute of the wgmma attention forward (the lab build of the shipped source) beside
# cuDNN's SDPA forward through PyTorch, at 16 x 16 x 1024 x 64 bf16 full: the D = 64 case at
# 0.87-0.90x of cuDNN that does not sit under the power cap (kernels/TUNING.md, sessions 61-62).
# Launch configuration (cuDNN's tile from its grid), occupancy, tensor-pipe use, warp stall
# reasons. On the GPU machine (nvcc 13.0, ncu, PyTorch), from the repository root:
#   bash kernels/tuning/attn_fwd_ncu.sh [OUT] [B H N D]
# Prepared in session 62; not yet run (the session's device time was spent).
set -u
out=${1:-${OUT:-/tmp}}; shift || true
shape=${*:-16 16 1024 64}
mkdir -p "$out"
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/attn_fwd_ncu kernels/tuning/attn_wgmma_lab.cu \
  -lcuda > "$out/build.txt" 2>&1 || { echo "build failed"; tail "$out/build.txt"; exit 1; }
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats"
S="$S --section ComputeWorkloadAnalysis --section SchedulerStats"
py=$(ls /opt/torch/.venv/bin/python3 2>/dev/null || command -v python3)
cat > /tmp/attn_fwd_ncu.py <<PY
import torch, torch.nn.functional as F
b, h, n, d = (int(x) for x in "$shape".split())
q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(6):
    o = F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
# shellcheck disable=SC2086
timeout 120 ncu --target-processes all -k regex:'sdpa|fmha|flash|attn|fprop' --launch-skip 2 --launch-count 1 $S \
  "$py" /tmp/attn_fwd_ncu.py > "$out/ncu_cudnn.txt" 2>&1; echo "cudnn rc=$?"
# shellcheck disable=SC2086
AW_ITERS=10 timeout 120 ncu -k regex:attn_fwd --launch-skip 3 --launch-count 1 $S /tmp/attn_fwd_ncu time $shape 0 \
  > "$out/ncu_ours.txt" 2>&1; echo "ours rc=$?"
for f in ncu_cudnn ncu_ours; do
  echo "== $f"
  grep -E "^  [a-zA-Z_].*\(|Grid Size|Block Size|Registers Per|Dynamic Shared|Duration|Executed Ipc A|Issue Slots Busy|Achieved Occ|Stall" \
    "$out/$f.txt" | head -30
done
