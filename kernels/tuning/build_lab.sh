#!/bin/bash
# Builds the lab's two programs on a GPU machine (nvcc, pip's cuBLAS): /tmp/tc_lab (our kernels'
# committed PTX, checked and timed) and /tmp/cublaslt_algos (cuBLASLt's algorithms, timed).
#   bash kernels/tuning/build_lab.sh
set -u
nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/tc_lab kernels/tuning/tc_lab.cu -lcuda || exit 1
lt_h=$(find / -xdev -name cublasLt.h -path '*nvidia*' 2>/dev/null | head -1)
lt_so=$(ls "$(dirname "$lt_h")"/../lib/libcublasLt.so* | head -1)
g++ -O2 -std=c++17 -I/usr/local/cuda/include -I"$(dirname "$lt_h")" kernels/tuning/cublaslt_algos.cpp \
    -L/usr/local/cuda/lib64 -L"$(dirname "$lt_so")" -l:"$(basename "$lt_so")" -lcudart \
    -Wl,-rpath,"$(dirname "$lt_so")" -o /tmp/cublaslt_algos || exit 1
