#!/bin/bash
# Session 65 run f (one H200): the final build's attention and GPT test binaries (the refitted
# tile model is host code the whole-suite run rc did not have), carried alone as
# run65/bin/fin.tar.xz; then attention_bench's forward + backward with the ordered one pass
# against the automatic choice, in turn (ours only): session 64 left the ordered pass at D = 128
# unmeasured since the descriptors by one add took its local memory from 436 to 32 bytes.
set -u
O=$OUT; mkdir -p $O
mkdir -p /tmp/fin && tar xJf run65/bin/fin.tar.xz -C /tmp/fin
for t in attention_a attention_b attention_layout attention_tile_order attention_rows192 tensor_attention gpt_model gpt_training gpt_parity; do
  t0=$SECONDS
  timeout 150 /tmp/fin/$t --test-threads 4 > $O/$t.log 2>&1; rc=$?
  printf "%-22s rc=%3d %4ds %s\n" $t $rc $((SECONDS-t0)) "$(grep -E '^test result' $O/$t.log | tail -1)" | tee -a $O/summary.txt
done
grep -h -E "^test result" $O/*.log | awk '{p+=$4; f+=$6; i+=$8} END {print "TOTAL", NR, "binaries, passed",p,"failed",f,"ignored",i}' | tee -a $O/summary.txt
for m in ordered auto; do
  timeout 120 /tmp/fin/attention_bench --bwd-dq $m --filter "sdpa fwdbwd bf16" 2>/dev/null | grep -E "^sdpa" | sed "s/^/$m: /" | cut -c1-110 >> $O/ordered.txt
done
sort -k4 $O/ordered.txt
mkdir -p $O/logs && mv $O/*.log $O/logs/ && cd $O && tar czf logs.tgz logs && rm -rf logs
# Then, the machine still warm, two more rounds at the two D = 128 shapes with the most keys
# (ordered2.txt), from the run tool's command line:
#   for r in 1 2; do for m in auto ordered; do for s in 1x16x16384x128 4x16x4096x128; do
#     timeout 60 /tmp/fin/attention_bench --bwd-dq $m --filter "sdpa fwdbwd bf16 $s" ...
