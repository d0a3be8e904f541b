#!/usr/bin/env python3
"""nvrtc12_cubin.py: a cubin of one kernel file as the crate would ship it (NVRTC 12.4, the
options gen-ptx uses), with extra -D flags for lab variants. Run where gen-ptx has installed its
NVRTC (the development machine; no GPU needed), then carry the cubins to the GPU machine.

    python3 kernels/tuning/nvrtc12_cubin.py kernels/cuda/attention_wgmma_bwd.cu out.cubin \\
        -std=c++17 -arch=sm_90a -I kernels/cuda [-DABW_KV_OVERLAP=0 ...] [--ptxas-options=-v]

With no -D flags the output is byte-identical to the committed sass/<file>.sm_90a.cubin.
NVRTC_12_4_LIB overrides the library path (as for gen-ptx).
"""
import ctypes
import os
import sys

LIB = os.environ.get("NVRTC_12_4_LIB") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
    "cuda-rs-tools/nvrtc-12.4.127/nvidia/cuda_nvrtc/lib/libnvrtc.so.12")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src_path, out, *opts = sys.argv[1:]
    lib = ctypes.CDLL(LIB)
    prog = ctypes.c_void_p()
    src = open(src_path, "rb").read()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, src_path.encode(), 0, None, None):
        sys.exit("nvrtcCreateProgram failed")
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if log.value.strip():
        print(log.value.decode(), file=sys.stderr)
    if rc:
        sys.exit(f"nvrtcCompileProgram failed ({rc})")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    if lib.nvrtcGetCUBIN(prog, buf):
        sys.exit("nvrtcGetCUBIN failed")
    with open(out, "wb") as f:
        f.write(buf.raw)


if __name__ == "__main__":
    main()
