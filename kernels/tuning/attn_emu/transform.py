#!/usr/bin/env python3
"""transform.py FILE.cu — the kernel source as the emulator (run.sh) compiles it, on stdout:
its #includes dropped (emu.h stands in for dtype.cuh, mma_warp_tile.cuh, shared_address.cuh),
its cp.async helpers (<prefix>_cp16, _commit, _wait_all, _wait_all_but_one), its shared store
(_sts32) and its f32 atomic add (_red_add) replaced by the emulator's, and its `extern __shared__`
array given AB_DKDV128_DYN_SMEM bytes."""
import re
import sys

src = open(sys.argv[1]).read()
out = []
lines = src.split("\n")
i = 0
found = set()
while i < len(lines):
    l = lines[i]
    if l.startswith("#include"):
        i += 1
        continue
    m = re.match(r"__device__ __forceinline__ void ((ab|am)_(cp16|commit|wait_all_but_one|wait_all|sts32|red_add))\(", l)
    if m:
        found.add(m.group(3))
        prefix = m.group(2)
        # skip to the line that closes the function
        while not lines[i].rstrip().endswith("}"):
            i += 1
        i += 1
        continue
    if l.startswith("extern __shared__"):
        found.add("extern")
        name = re.search(r"(\w+)\[\];", l).group(1)
        out.append(f"alignas(16) unsigned char {name}[AB_DKDV128_DYN_SMEM];")
        i += 1
        continue
    out.append(l)
    i += 1
need = {"cp16", "commit", "wait_all"}
if not need <= found:
    sys.exit(f"transform: did not find {need - found}")
print('#include "emu.h"')
print(f"inline void {prefix}_cp16(unsigned dst, const void* src, int bytes) {{ emu::cp16(dst, src, bytes); }}")
print(f"inline void {prefix}_commit() {{ emu::commit(); }}")
print(f"inline void {prefix}_wait_all() {{ emu::wait_group(0); }}")
if "sts32" in found:
    print(f"inline void {prefix}_sts32(unsigned addr, unsigned v) {{ emu::sts32(addr, v); }}")
if "red_add" in found:
    print(f"inline void {prefix}_red_add(float* p, float v) {{ emu::red_add(p, v); }}")
if "wait_all_but_one" in found:
    print(f"inline void {prefix}_wait_all_but_one() {{ emu::wait_group(1); }}")
print("\n".join(out))
