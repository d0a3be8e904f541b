#!/bin/bash
# Session 66 run g (one H200): the GEMMs with GWX_DESC_ADD = 2 (every tile but 128 x 256 builds
# its descriptors by one add) as the library ships it (NVRTC 12.4's cubin): the GEMM test binaries;
# the hgemm sweep's long-K, 1000^3 and 1024^2 x 8192 cases with PyTorch in the same command (ours
# case by case, as run d did before the change); memcheck on gemm_half_shapes with the time left.
set -u
O=$OUT; W=/tmp/rg; mkdir -p $W/sw $W/logs
mkdir -p /tmp/g && tar xJf run66/g.tar.xz -C /tmp/g; T=/tmp/g/bin
for t in gemm_half_shapes gemm_tc gemv_half tensor_matmul_backends tensor_linear_grad; do
  t0=$SECONDS; timeout 90 $T/$t --test-threads 4 > $W/logs/$t.log 2>&1; rc=$?
  printf "%-26s rc=%3d %4ds %s\n" $t $rc $((SECONDS-t0)) "$(grep -E '^test result' $W/logs/$t.log | tail -1)" >> $W/summary.txt
done
K=$T/kernels_bench
$K --sweep-cases > $W/sw/all.json
python3 -c "import json,sys; print(json.dumps([c for c in json.load(open(sys.argv[1])) if c['id'].startswith('hgemm') and ('x16384' in c['id'] or 'x65536' in c['id'] or 'x131072' in c['id'] or '1024x1024x8192' in c['id'] or '1000x1000x1000' in c['id'])]))" $W/sw/all.json > $W/sw/cases.json
timeout 90 python3 tools/torch_sweep.py $W/sw/cases.json > $W/sw/torch.json 2> $W/sw/torch.err; echo "torch_sweep $?" >> $W/summary.txt
for id in $(python3 -c "import json,sys; [print(c['id'].split(' ',1)[1].replace(' ','_')) for c in json.load(open(sys.argv[1]))]" $W/sw/cases.json); do
  timeout 30 $K --sweep --torch-sweep $W/sw/torch.json --out $W/sw/o --filter "hgemm ${id//_/ }" > $W/sw/$id.txt 2>&1
  grep -E "^\s*hgemm .*\|" $W/sw/$id.txt | head -1 >> $W/summary.txt
done
timeout $((175 - SECONDS)) compute-sanitizer --tool memcheck $T/gemm_half_shapes --test-threads 4 > $W/memcheck.txt 2>&1; echo "memcheck rc=$? $(tail -1 $W/memcheck.txt)" >> $W/summary.txt
cat $W/summary.txt
cd $W && tar czf $O/rg.tgz summary.txt logs sw memcheck.txt
