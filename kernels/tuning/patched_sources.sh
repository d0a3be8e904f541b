#!/bin/bash
# Copies kernels/cuda and one lab harness into a new temporary directory, applies a dropped
# variant's patch there and prints the directory; the shipped sources stay untouched. From the
# repository root:
#   src=$(bash kernels/tuning/patched_sources.sh PATCH LAB) || exit 1
#   nvcc ... "$src/kernels/tuning/LAB"
# (PATCH and LAB are file names under kernels/tuning/.)
set -u
patch=$1 lab=$2
src=$(mktemp -d)
mkdir -p "$src/kernels/tuning" && cp -r kernels/cuda "$src/kernels/" && cp "kernels/tuning/$lab" "$src/kernels/tuning/"
(cd "$src" && git apply "$OLDPWD/kernels/tuning/$patch") || { echo "$patch does not apply" >&2; exit 1; }
echo "$src"
