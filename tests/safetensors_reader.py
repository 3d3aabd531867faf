#!/usr/bin/python3
"""safetensors_reader.py — an independent safetensors reader for lutra's tests (Python json + struct only).

usage: safetensors_reader.py [--json] [--verify-checksum] FILE

Prints, per tensor in data-offset order, its name, dtype, shape and the sum of its elements as a float:
    tensor "state_dict.fc.weight" F32 [784, 10] sum=-1.25
and then each __metadata__ key. With --json, one JSON object per line instead:
    {"name": ..., "dtype": ..., "shape": [...], "sum": ...}  (sum as repr of a Python float)
With --verify-checksum, also checks lutra's "lutra_checksum" (CRC-32 of the whole file with the 8 hex
digits of that value read as "00000000"), computed here in pure Python, and that a file whose metadata
says "format": "lutra" has one.
Exits 1 with "error: ..." on stderr for a malformed file, 2 for bad usage.
"""
import json
import struct
import sys

DTYPES = {
    # name: (size, struct code or None when there is no plain Python reading)
    "BOOL": (1, "?"), "U8": (1, "B"), "I8": (1, "b"), "I16": (2, "h"), "U16": (2, "H"),
    "F16": (2, "e"), "BF16": (2, None), "I32": (4, "i"), "U32": (4, "I"), "F32": (4, "f"),
    "F64": (8, "d"), "I64": (8, "q"), "U64": (8, "Q"), "F8_E4M3": (1, None), "F8_E5M2": (1, None),
}


class Malformed(Exception):
    pass


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise Malformed("duplicate key %r in header" % k)
        d[k] = v
    return d


def reject_constant(name):
    raise Malformed("header holds %s, which JSON does not allow" % name)


def is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def crc32(data):
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (0xEDB88320 ^ (c >> 1)) if c & 1 else (c >> 1)
        table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def bf16_values(raw):
    for (h,) in struct.iter_unpack("<H", raw):
        yield struct.unpack("<f", struct.pack("<I", h << 16))[0]


def read(path, verify):
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise Malformed("file too short (%d bytes)" % len(buf))
    (n,) = struct.unpack("<Q", buf[:8])
    if n > 100_000_000:
        raise Malformed("absurd header length %d" % n)
    if 8 + n > len(buf):
        raise Malformed("header length %d runs past the end of the file (%d bytes)" % (n, len(buf)))
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates,
                            parse_constant=reject_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise Malformed("header is not valid JSON: %s" % e)
    if not isinstance(header, dict):
        raise Malformed("header is not a JSON object")
    data = buf[8 + n:]
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise Malformed("__metadata__ is not an object of strings")
    tensors = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise Malformed("tensor %r: entry must have exactly dtype, shape, data_offsets" % name)
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise Malformed("tensor %r: unknown dtype %r" % (name, dtype))
        if not isinstance(shape, list) or not all(is_uint(s) for s in shape):
            raise Malformed("tensor %r: bad shape" % name)
        if not isinstance(offs, list) or len(offs) != 2 or not all(is_uint(o) for o in offs) or offs[0] > offs[1]:
            raise Malformed("tensor %r: bad data_offsets" % name)
        numel = 1
        for s in shape:
            numel *= s
        if numel * DTYPES[dtype][0] != offs[1] - offs[0]:
            raise Malformed("tensor %r: shape/dtype size does not match data_offsets" % name)
        tensors.append((offs[0], offs[1], name, dtype, shape))
    tensors.sort()
    pos = 0
    for b, e, name, _, _ in tensors:
        if b != pos:
            raise Malformed("tensor %r: data_offsets do not follow the previous tensor (gap or overlap)" % name)
        pos = e
    if pos != len(data):
        raise Malformed("data buffer is %d bytes, tensors cover %d" % (len(data), pos))
    if verify and "lutra_checksum" not in meta and meta.get("format") == "lutra":
        raise Malformed("a lutra file without lutra_checksum: the header is damaged")
    if verify and "lutra_checksum" in meta:
        ck = meta["lutra_checksum"]
        pat = b'"lutra_checksum":"crc32:'
        at = buf.find(pat, 8, 8 + n)
        if at < 0 or buf.find(pat, at + 1, 8 + n) >= 0:
            raise Malformed("lutra_checksum not found exactly once in the raw header")
        d = at + len(pat)
        got = "crc32:%08x" % crc32(buf[:d] + b"00000000" + buf[d + 8:])
        if got != ck:
            raise Malformed("checksum mismatch: file says %s, contents give %s" % (ck, got))
    out = []
    for b, e, name, dtype, shape in tensors:
        raw = data[b:e]
        code = DTYPES[dtype][1]
        if dtype == "BF16":
            total = float(sum(bf16_values(raw)))
        elif code is None:
            total = float("nan")
        else:
            total = float(sum(v for (v,) in struct.iter_unpack("<" + code, raw)))
        out.append((name, dtype, shape, total))
    return out, meta


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    if len(args) != 1 or any(f not in ("--json", "--verify-checksum") for f in flags):
        sys.stderr.write(__doc__)
        return 2
    try:
        tensors, meta = read(args[0], "--verify-checksum" in flags)
    except Malformed as e:
        sys.stderr.write("error: %s: %s\n" % (args[0], e))
        return 1
    except OSError as e:
        sys.stderr.write("error: %s\n" % e)
        return 1
    for name, dtype, shape, total in tensors:
        if "--json" in flags:
            print(json.dumps({"name": name, "dtype": dtype, "shape": shape, "sum": total if total == total else None}))
        else:
            print("tensor %s %s %s sum=%r" % (json.dumps(name), dtype, json.dumps(shape), total))
    if "--json" not in flags:
        for k in meta:
            print("metadata %s" % json.dumps(k))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
