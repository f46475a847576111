# Usage: python3 scripts/vocab_with_pre.py MODEL.gguf OUT.gguf PRE NAME
# Copies a GGUF file's metadata (no tensors) into a vocabulary-only file, as
# llama.cpp's ggml-vocab-*.gguf test files are, with tokenizer.ggml.pre set
# to argv[3] and general.name to argv[4].
import struct, sys
src = open(sys.argv[1], 'rb').read()
assert src[:4] == b'GGUF'
version, n_tensors, n_kv = struct.unpack_from('<IQQ', src, 4)
SIZES = {0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}
def read_string(p):
    (n,) = struct.unpack_from('<Q', src, p); return src[p+8:p+8+n], p + 8 + n
def skip_value(p, t):
    if t == 8: return read_string(p)[1]
    if t == 9:
        et, n = struct.unpack_from('<IQ', src, p); p += 12
        if et == 8:
            for _ in range(n): p = read_string(p)[1]
            return p
        return p + SIZES[et] * n
    return p + SIZES[t]
def string_kv(key, value):
    k = key.encode(); v = value.encode()
    return struct.pack('<Q', len(k)) + k + struct.pack('<I', 8) + struct.pack('<Q', len(v)) + v
pos = 24
out_kv = b''
for _ in range(n_kv):
    key, p = read_string(pos)
    (t,) = struct.unpack_from('<I', src, p)
    end = skip_value(p + 4, t)
    if key == b'tokenizer.ggml.pre':
        out_kv += string_kv('tokenizer.ggml.pre', sys.argv[3])
    elif key == b'general.name':
        out_kv += string_kv('general.name', sys.argv[4])
    else:
        out_kv += src[pos:end]
    pos = end
out = b'GGUF' + struct.pack('<IQQ', 3, 0, n_kv) + out_kv
out += b'\0' * ((-len(out)) % 32)
open(sys.argv[2], 'wb').write(out)
print(f"{n_kv} keys, {len(out)} bytes")
