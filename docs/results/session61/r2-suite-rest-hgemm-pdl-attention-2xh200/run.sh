#!/bin/bash
# Session 61 run 2 (2 x H200): the 12 test binaries run 1's budget cut; the small-K hgemm cases
# with and without the product's programmatic dependency; attention_bench fwd+bwd with PyTorch.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT; mkdir -p $O/sw
cd .gpu && tar xJf gpu61b.tar.xz && cd ..
TESTS="$(ls -d .gpu/tests/*)" BUDGET=400 bash .gpu/suite61.sh
tail -3 $O/summary.txt
B=.gpu/bin/kernels_bench
$B --sweep-cases > $O/sw/all.json
python3 -c "import json,sys; print(json.dumps([c for c in json.load(open(sys.argv[1])) if '8192x8192x' in c['id'] or '4096x4096x64' in c['id']]))" $O/sw/all.json > $O/sw/cases.json
python3 tools/torch_sweep.py $O/sw/cases.json > $O/sw/torch.json 2> $O/sw/torch.err; echo "torch_sweep $?"
for v in pdl nopdl pdl2; do
  if [ $v = nopdl ]; then export LAB_NO_PDL=1; else unset LAB_NO_PDL; fi
  $B --sweep --torch-sweep $O/sw/torch.json --out $O/sw/$v --filter 8192x8192x > $O/sw/$v.txt 2>&1; echo "sweep $v $?"
  grep -E "hgemm .* \|" $O/sw/$v.txt | awk -F'|' '{printf "%-34s %s %s %s %s %s %s\n", $2, $3, $5, $6, $7, $9, $10}'
done
timeout 200 .gpu/bin/attention_bench --filter "sdpa fwdbwd bf16" --bwd-dq auto --torch-run > $O/attn_auto.txt 2>&1; echo "attention_bench $?"
grep -E "sdpa|PASS|MISS" $O/attn_auto.txt | tail -18
cd $O && tar czf logs.tgz logs && rm -rf logs
