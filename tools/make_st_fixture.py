#!/usr/bin/python3
"""Write tests/fixtures/st_half.safetensors: F16 and BF16 tensors of known values, written
by this independent writer (the standard library only: struct and json) for
tests/test_st_convert.c, which reads it with the library's reader.

    /usr/bin/python3 tools/make_st_fixture.py [OUT]   (default tests/fixtures/st_half.safetensors)

The F16 values are packed with struct's 'e' format (IEEE 754 binary16, round to nearest
even); the BF16 values are exact bfloat16 numbers written as the top 16 bits of their
float32 pattern. Unlike the library's writer, this one keeps the tensors in header order
(the F32 tensor starts at data offset 26, not a multiple of 4, which the reader must cope
with) and pads the header with no spaces (its size is not a multiple of 8). Tensors, in
file order:
  bf     BF16 [3]    1, -3, 3.140625
  half   F16  [2,4]  1, -2, 65504, 2^-24, 2^-14, 2^-14 - 2^-24, -0.0, 0.333251953125
  inf    F16  [2]    inf, -inf
  f32    F32  [2]    0.5, -1.25
  tiny   BF16 []     2^-133 (the smallest bfloat16 subnormal)
metadata: {"writer": "tools/make_st_fixture.py"}
"""
import json
import struct
import sys

HALF = [1.0, -2.0, 65504.0, 2.0 ** -24, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -24, -0.0,
        0.333251953125]
BF = [1.0, -3.0, 3.140625]


def f16_bytes(values):
    return b"".join(struct.pack("<e", v) for v in values)


def bf16_bytes(values):
    out = b""
    for v in values:
        (u,) = struct.unpack("<I", struct.pack("<f", v))
        assert u & 0xFFFF == 0, f"{v} is not a bfloat16 number"
        out += struct.pack("<H", u >> 16)
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/st_half.safetensors"
    tensors = [  # (name, dtype, shape, bytes), in file order
        ("bf", "BF16", [3], bf16_bytes(BF)),
        ("half", "F16", [2, 4], f16_bytes(HALF)),
        ("inf", "F16", [2], f16_bytes([float("inf"), float("-inf")])),
        ("f32", "F32", [2], struct.pack("<2f", 0.5, -1.25)),
        ("tiny", "BF16", [], bf16_bytes([2.0 ** -133])),
    ]
    header = {"__metadata__": {"writer": "tools/make_st_fixture.py"}}
    data, off = b"", 0
    for name, dt, shape, b in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        data += b
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    print(f"{out}: header {len(h)} bytes, data {len(data)} bytes")


if __name__ == "__main__":
    main()
