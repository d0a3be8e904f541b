#!/bin/bash
# Session 66 run e (one H200): Nsight Compute's full set on cuBLAS's 1024 x 1024 x 8192 bf16 NN
# kernel (nvjet_sm90_tst_128x64_64x8_1x2: 128 CTAs in clusters of two, whole K each) and on
# ours at the same decomposition (gemm_wgx_128x64_bf16_nn and the pair gemm_wgx_128x64x2_bf16_nn,
# one slice; through the split-K lab, which launches the library's kernels), plus our 128 x 128
# with two slices (the plan's choice). One tar back.
set -u
O=$OUT; W=/tmp/re; mkdir -p $W
cat > $W/mm.py <<'PY'
import torch
a = torch.randn(1024, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
PY
cub=$(find / -xdev -name 'libcublas.so.1[0-9]*' -path '*nvidia*' 2>/dev/null | head -1)
timeout 120 ncu --set full -k regex:nvjet -s 1 -c 1 python3 $W/mm.py > $W/cublas.txt 2>&1; echo "cublas $?"
for k in gemm_wgx_128x64_bf16_nn gemm_wgx_128x64x2_bf16_nn gemm_wgx_128x128_bf16_nn; do
  s=0; [ $k = gemm_wgx_128x128_bf16_nn ] && s=1
  CUBLAS_LIB=$cub LAB_ROUNDS=1 LAB_REPS=2 LAB_SETTLE_MS=0 timeout 150 ncu --set full -k regex:"^$k\$" -s $s -c 1 run66/splitk_pair 1024 1024 8192 nn > $W/$k.txt 2>&1; echo "$k $?"
done
for f in $W/*.txt; do echo "== $f"; grep -E "^\s+(Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Executed Ipc Active|Issue Slots Busy|Registers Per Thread|Achieved Occupancy)\s" $f | head -12; done
cd $W && tar czf $O/re.tgz *.txt
