#!/usr/bin/python3
"""Check a safetensors file (e.g. a checkpoint or a model written by mha_st_save) and list it.

Dev-only; run with the system Python (no safetensors package is needed or used):

    /usr/bin/python3 tools/check_safetensors.py FILE [FILE ...]

The file is read the way the format's README defines it, with struct and json only,
independently of train/common/st.c:
    8 bytes   N, unsigned little-endian 64-bit: the header size
    N bytes   UTF-8 JSON object, starting with '{', maybe padded at the end with spaces
    the rest  the data section; tensor NAME is bytes [begin, end) of it
and these rules are checked: no duplicate keys, "__metadata__" (optional) maps strings to
strings, every entry has dtype / shape / data_offsets with end - begin = prod(shape) *
element size, and the ranges tile the data section (no overlap, no hole, nothing after).
It also reports whether the data section and every tensor are aligned (mha_st_save promises
both). When torch is importable, each tensor whose dtype torch has is built with
torch.frombuffer(...).reshape(shape) to show PyTorch can use the bytes as they are.

Checkpoints of mha-gpt and mha-g2p carry checksums in the metadata (train/common/ckpt.h):
"crc32c.<name>" = the CRC-32C of tensor <name>'s bytes and "crc32c.__metadata__" = the CRC-32C
of every other metadata pair sorted by key, each as key NUL value NUL (8 lower-case hex
digits). When a file has them they are recomputed here, with a CRC-32C of this file's own
(bit-at-a-time, slow but independent of train/common/crc32c.c), and a mismatch is a broken rule.

Prints one line per tensor (name, dtype, shape, data_offsets, crc32 of its bytes) and the
metadata. Exit status: 0 if the file is valid, 1 if it breaks a rule (the first problem
is printed), 2 if it cannot be read.
"""
import argparse
import json
import math
import struct
import sys
import zlib

# Element sizes of every safetensors dtype (the format's README, "dtype").
DTYPE_SIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
MAX_HEADER = 100_000_000  # the reference reader's limit


class FormatError(Exception):
    pass


def _crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli; reflected, polynomial 0x82F63B78); crc32c(b"123456789") is
    0xE3069283."""
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ CRC32C_TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def check_checksums(blob, start, meta, tensors):
    """Recompute the crc32c.* metadata of a checkpoint; the number checked (0: none)."""
    keys = [k for k in meta if k.startswith("crc32c.")]
    if not keys:
        return 0
    names = {t[0] for t in tensors}
    for k in keys:
        if k != "crc32c.__metadata__" and k[len("crc32c."):] not in names:
            raise FormatError(f"checksum {k!r} of a tensor the file does not hold")
    for name, _, _, begin, end in tensors:
        want = meta.get("crc32c." + name)
        got = f"{crc32c(blob[start + begin:start + end]):08x}"
        if want != got:
            raise FormatError(f"tensor {name!r}: CRC-32C {got}, the metadata says {want}")
    c = 0
    for k in sorted(k for k in meta if not k.startswith("crc32c.")):
        c = crc32c(k.encode() + b"\0" + meta[k].encode() + b"\0", c)
    if meta.get("crc32c.__metadata__") != f"{c:08x}":
        raise FormatError(f"the metadata's CRC-32C is {c:08x}, crc32c.__metadata__ says "
                          f"{meta.get('crc32c.__metadata__')}")
    return len(tensors)


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise FormatError(f"key {k!r} appears twice")
        d[k] = v
    return d


def is_uint(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def parse(blob):
    """Return (header_size, metadata dict, [(name, dtype, shape, begin, end)])."""
    if len(blob) < 8:
        raise FormatError(f"{len(blob)} bytes: shorter than the 8-byte size field")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER:
        raise FormatError(f"header size {n} exceeds {MAX_HEADER}")
    if 8 + n > len(blob):
        raise FormatError(f"header size {n} but only {len(blob) - 8} bytes follow")
    raw = blob[8:8 + n]
    if not raw.startswith(b"{"):
        raise FormatError("header does not start with '{'")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"header is not UTF-8: {e}") from None
    try:
        header = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise FormatError(f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError("header is not a JSON object")
    body = text.rstrip(" ")
    if not body.endswith("}"):
        raise FormatError("header has something other than spaces after the object")

    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError("__metadata__ is not an object of strings")
    tensors = []
    for name, e in header.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise FormatError(f"tensor {name!r}: entry must have exactly dtype, shape, data_offsets")
        dt, shape, off = e["dtype"], e["shape"], e["data_offsets"]
        if dt not in DTYPE_SIZE:
            raise FormatError(f"tensor {name!r}: unknown dtype {dt!r}")
        if not isinstance(shape, list) or not all(is_uint(d) for d in shape):
            raise FormatError(f"tensor {name!r}: shape is not a list of integers >= 0")
        if not (isinstance(off, list) and len(off) == 2 and all(is_uint(o) for o in off)):
            raise FormatError(f"tensor {name!r}: data_offsets is not [begin, end]")
        begin, end = off
        need = math.prod(shape) * DTYPE_SIZE[dt]
        if end < begin or end - begin != need:
            raise FormatError(f"tensor {name!r}: data_offsets {off} but {dt} {shape} needs {need} bytes")
        tensors.append((name, dt, shape, begin, end))

    data_size = len(blob) - 8 - n
    pos = 0
    for name, _, _, begin, end in sorted(tensors, key=lambda t: (t[3], t[4])):
        if begin != pos:
            raise FormatError(f"tensor {name!r} begins at {begin}, expected {pos} "
                              f"({'overlap' if begin < pos else 'hole'})")
        pos = end
    if pos != data_size:
        raise FormatError(f"the tensors cover {pos} bytes of a {data_size}-byte data section")
    return n, meta, tensors


def torch_view(torch, blob, dt, shape):
    """The tensor as torch sees the bytes, or None if torch has no such dtype."""
    tdt = {"F32": "float32", "F64": "float64", "I64": "int64", "I32": "int32",
           "I16": "int16", "I8": "int8", "U8": "uint8", "F16": "float16",
           "BF16": "bfloat16", "BOOL": "bool", "U64": "uint64"}.get(dt)
    tdt = getattr(torch, tdt, None) if tdt else None
    if tdt is None:
        return None
    t = torch.frombuffer(bytearray(blob), dtype=tdt) if blob else torch.empty(0, dtype=tdt)
    return t.reshape(shape)


def check(path, torch):
    try:
        with open(path, "rb") as fp:
            blob = fp.read()
    except OSError as e:
        print(f"{path}: cannot read: {e}")
        return 2
    try:
        n, meta, tensors = parse(blob)
    except FormatError as e:
        print(f"{path}: INVALID: {e}")
        return 1
    start = 8 + n
    print(f"{path}: valid safetensors, {len(blob)} bytes, header {n} bytes, "
          f"data section at offset {start} ({'8-aligned' if start % 8 == 0 else 'NOT 8-aligned'}), "
          f"{len(tensors)} tensors")
    try:
        n_crc = check_checksums(blob, start, meta, tensors)
    except FormatError as e:
        print(f"{path}: INVALID: {e}")
        return 1
    for k, v in meta.items():
        if not k.startswith("crc32c."):
            print(f"  metadata {k!r}: {v!r}")
    if n_crc:
        print(f"  checksums: the CRC-32C of all {n_crc} tensors and of the metadata match")
    misaligned = 0
    for name, dt, shape, begin, end in tensors:
        chunk = blob[start + begin:start + end]
        aligned = (start + begin) % DTYPE_SIZE[dt] == 0
        misaligned += not aligned
        line = (f"  {name!r:28} {dt:4} {str(shape):16} [{begin}, {end})"
                f" crc32={zlib.crc32(chunk):08x}{'' if aligned else ' MISALIGNED'}")
        if torch is not None:
            t = torch_view(torch, chunk, dt, shape)
            line += (f"  torch {str(t.dtype)[6:]}{tuple(t.shape)}" if t is not None
                     else f"  (torch {torch.__version__} has no {dt})")
        print(line)
    if misaligned:
        print(f"  note: {misaligned} tensors are not aligned to their element size")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE", help="safetensors file(s) to check")
    args = ap.parse_args()
    try:
        import torch  # optional: only to show torch can wrap the bytes
    except ImportError:
        torch = None
    return max(check(p, torch) for p in args.files)


if __name__ == "__main__":
    sys.exit(main())
