#!/usr/bin/env python3
"""Regenerates ggml_mul_mat.bin: outputs of llama.cpp's own CPU `ggml_mul_mat`
(through the ggml libraries bundled with llama-cpp-python, an AVX2/FMA/F16C
build) for a few small quantized matrices, so the Rust tests can check that
`cpu::QuantizedMatrix` reproduces them bit for bit.

    python3 ggml_mul_mat.py [path/to/llama_cpp/lib]

ggml runs K-quant products through its tiled kernels for batches of 8 rows or
more and through `vec_dot`, which rounds differently, for smaller ones;
repacked Q4_K goes through the repack gemm for each group of 4 rows and its
gemv, which rounds unlike the gemm, for the rows left over. The cases (1, 6
and 9 rows) meet each of these kernels.

File layout (little-endian): b"TLGG", u32 version, u32 case count; then per
case u32 ggml type, rows, cols, m, repacked (0/1); the weight bytes; x as
f32[m*cols]; out as f32[m*rows].
"""

import ctypes as C
import os
import struct
import sys

import numpy as np

Q4_0, Q4_1, Q8_0, F32 = 2, 3, 8, 0
Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K = 6, 7, 10, 11, 12, 13, 14
# (values, bytes) of a block.
BLOCKS = {Q4_0: (32, 18), Q4_1: (32, 20), Q8_0: (32, 34), Q5_0: (32, 22), Q5_1: (32, 24),
          Q2_K: (256, 84), Q3_K: (256, 110), Q4_K: (256, 144), Q5_K: (256, 176), Q6_K: (256, 210)}


def load_libraries(lib_dir):
    base = C.CDLL(os.path.join(lib_dir, "libggml-base.so"), mode=C.RTLD_GLOBAL)
    cpu = C.CDLL(os.path.join(lib_dir, "libggml-cpu.so"), mode=C.RTLD_GLOBAL)
    vp, i64, sz = C.c_void_p, C.c_int64, C.c_size_t
    signatures = {
        (base, "ggml_init"): ([InitParams], vp),
        (base, "ggml_free"): ([vp], None),
        (base, "ggml_new_tensor_2d"): ([vp, C.c_int, i64, i64], vp),
        (base, "ggml_mul_mat"): ([vp, vp, vp], vp),
        (base, "ggml_new_graph"): ([vp], vp),
        (base, "ggml_build_forward_expand"): ([vp, vp], None),
        (base, "ggml_graph_overhead"): ([], sz),
        (base, "ggml_tensor_overhead"): ([], sz),
        (base, "ggml_nbytes"): ([vp], sz),
        (base, "ggml_quantize_chunk"): ([C.c_int, vp, vp, i64, i64, i64, vp], sz),
        (base, "ggml_backend_alloc_ctx_tensors_from_buft"): ([vp, vp], vp),
        (base, "ggml_backend_tensor_set"): ([vp, vp, sz, sz], None),
        (base, "ggml_backend_tensor_get"): ([vp, vp, sz, sz], None),
        (base, "ggml_backend_graph_compute"): ([vp, vp], C.c_int),
        (base, "ggml_backend_cpu_buffer_type"): ([], vp),
        (base, "ggml_backend_reg_get_proc_address"): ([vp, C.c_char_p], vp),
        (base, "ggml_backend_reg_dev_get"): ([vp, sz], vp),
        (cpu, "ggml_backend_cpu_reg"): ([], vp),
        (cpu, "ggml_backend_cpu_init"): ([], vp),
        (cpu, "ggml_backend_cpu_set_n_threads"): ([vp, C.c_int], None),
    }
    for (lib, name), (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    return base, cpu


class InitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


def repack_buffer_type(base, cpu):
    reg = cpu.ggml_backend_cpu_reg()
    address = base.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
    get_extra = C.CFUNCTYPE(C.POINTER(C.c_void_p), C.c_void_p)(address)
    types = get_extra(base.ggml_backend_reg_dev_get(reg, 0))
    return types[0]  # CPU_REPACK is the only extra type on this build


def mul_mat(base, cpu, ty, weights, x, rows, cols, m, repacked):
    """`out = x · Wᵀ` on ggml's CPU backend, W repacked or in a plain buffer."""
    overhead = 8 * base.ggml_tensor_overhead() + base.ggml_graph_overhead()
    ctx_w = base.ggml_init(InitParams(overhead, None, True))
    ctx = base.ggml_init(InitParams(overhead, None, True))
    w = base.ggml_new_tensor_2d(ctx_w, ty, cols, rows)
    xt = base.ggml_new_tensor_2d(ctx, F32, cols, m)
    out = base.ggml_mul_mat(ctx, w, xt)
    graph = base.ggml_new_graph(ctx)
    base.ggml_build_forward_expand(graph, out)
    w_type = repack_buffer_type(base, cpu) if repacked else base.ggml_backend_cpu_buffer_type()
    buffers = [
        base.ggml_backend_alloc_ctx_tensors_from_buft(ctx_w, w_type),
        base.ggml_backend_alloc_ctx_tensors_from_buft(ctx, base.ggml_backend_cpu_buffer_type()),
    ]
    assert all(buffers)
    base.ggml_backend_tensor_set(w, weights.ctypes.data, 0, weights.nbytes)
    base.ggml_backend_tensor_set(xt, x.ctypes.data, 0, x.nbytes)
    backend = cpu.ggml_backend_cpu_init()
    cpu.ggml_backend_cpu_set_n_threads(backend, 2)
    assert base.ggml_backend_graph_compute(backend, graph) == 0
    result = np.zeros(m * rows, dtype=np.float32)
    base.ggml_backend_tensor_get(out, result.ctypes.data, 0, result.nbytes)
    base.ggml_free(ctx)
    base.ggml_free(ctx_w)
    return result


def activations(rng, m, cols):
    x = rng.standard_normal(m * cols).astype(np.float32)
    outliers = rng.random(m * cols) < 1 / 64
    x[outliers] *= 20
    x[:32] = 0  # a block of zeros: amax = 0
    x[32:64] = np.arange(32, dtype=np.float32) - 15.5  # exact .5 ties after scaling
    x[32] = 127.0
    return x


def main():
    lib_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__import__("llama_cpp").__file__), "lib")
    base, cpu = load_libraries(lib_dir)
    rng = np.random.default_rng(20240601)
    cases = []
    # The first four at 24×256, the later types at 24×512 (two K-quant
    # super-blocks); repacked where llama.cpp repacks on AVX2 (Q4_0, Q4_K).
    for ty, repacked, cols in [(Q4_0, True, 256), (Q4_0, False, 256), (Q4_1, False, 256),
                               (Q8_0, False, 256), (Q5_0, False, 512), (Q5_1, False, 512),
                               (Q4_K, True, 512), (Q4_K, False, 512), (Q5_K, False, 512),
                               (Q6_K, False, 512), (Q2_K, False, 512), (Q3_K, False, 512)]:
        rows = 24
        values = (rng.standard_normal(rows * cols) * 0.05).astype(np.float32)
        block_values, block_bytes = BLOCKS[ty]
        weights = np.zeros(rows * cols // block_values * block_bytes, dtype=np.uint8)
        base.ggml_quantize_chunk(ty, values.ctypes.data, weights.ctypes.data, 0, rows, cols, None)
        for m in (1, 6, 9):
            x = activations(rng, m, cols)
            out = mul_mat(base, cpu, ty, weights, x, rows, cols, m, repacked)
            cases.append((ty, rows, cols, m, repacked, weights, x, out))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ggml_mul_mat.bin")
    with open(path, "wb") as f:
        f.write(b"TLGG" + struct.pack("<II", 1, len(cases)))
        for ty, rows_, cols_, m, repacked, weights, x, out in cases:
            f.write(struct.pack("<5I", ty, rows_, cols_, m, int(repacked)))
            f.write(weights.tobytes() + x.tobytes() + out.tobytes())
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
