#!/bin/bash
# Session 66 run d (2 x H200, GPU 1): run c's hgemm sweep output did not come back (too many
# files): the long-K cases and the new 1024 x 1024 x 8192 with PyTorch in the same command, ours
# case by case; everything in one tar.
set -u
O=$OUT; W=/tmp/rd; mkdir -p $W/sw
export CUDA_VISIBLE_DEVICES=1
[ -d /tmp/c/bin ] || { mkdir -p /tmp/c && tar xJf run66/c.tar.xz -C /tmp/c; }
K=/tmp/c/bin/examples--kernels_bench
$K --sweep-cases > $W/sw/all.json
python3 -c "import json,sys; print(json.dumps([c for c in json.load(open(sys.argv[1])) if c['id'].startswith('hgemm') and ('x16384' in c['id'] or 'x65536' in c['id'] or 'x131072' in c['id'] or '1024x1024x8192' in c['id'])]))" $W/sw/all.json > $W/sw/cases.json
timeout 120 python3 tools/torch_sweep.py $W/sw/cases.json > $W/sw/torch.json 2> $W/sw/torch.err; echo "torch_sweep $?"
for id in $(python3 -c "import json,sys; [print(c['id'].split(' ',1)[1].replace(' ','_')) for c in json.load(open(sys.argv[1]))]" $W/sw/cases.json); do
  f="hgemm ${id//_/ }"
  timeout 40 $K --sweep --torch-sweep $W/sw/torch.json --out $W/sw/o --filter "$f" > $W/sw/$id.txt 2>&1
  grep -E "^\s*hgemm .*\|" $W/sw/$id.txt | head -3
done
cd $W && tar czf $O/rd.tgz sw
