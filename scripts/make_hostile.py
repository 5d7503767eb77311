#!/usr/bin/env python3
"""Writes the hostile corpus under tests/hostile/ (tests/hostile.rs loads each file and checks
the refusal). Standard library only, nothing here is unpickled or executed; every file is built
byte by byte so that it is exactly as malformed as its name says. Deterministic: rerunning it
rewrites the same bytes.  Usage: python3 scripts/make_hostile.py"""
import os, struct, zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "hostile")


def put(name, data):
    assert len(data) <= 24576, (name, len(data))
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- pickles (bare)
P2 = b"\x80\x02"
put("os_system.pkl", b"cos\nsystem\n(S'echo pwned'\ntR.")
put("builtins_eval.pkl", P2 + b"c__builtin__\neval\nX\x0b\x00\x00\x00print('hi')\x85R.")
# protocol 4: STACK_GLOBAL with the names as strings
put("builtins_exec_stack_global.pkl",
    b"\x80\x04\x8c\x08builtins\x8c\x04exec\x93\x8c\x0cimport os\x85R.")
# getattr(collections.OrderedDict, '__init__') ...: the chain starts with a refused global
put("getattr_chain.pkl",
    P2 + b"cbuiltins\ngetattr\nccollections\nOrderedDict\nX\x08\x00\x00\x00__init__\x86R)R.")
put("copyreg_reconstructor.pkl",
    P2 + b"ccopy_reg\n_reconstructor\ncos\n_wrap_close\nc__builtin__\nobject\nN\x87R.")
# EXT1: a copyreg extension-registry code instead of a global name
put("copyreg_ext1.pkl", P2 + b"\x82\x01)R.")
put("functools_partial.pkl",
    P2 + b"cfunctools\npartial\ncos\nsystem\nX\x02\x00\x00\x00id\x86R)R.")
# an allowed class whose REDUCE arguments hide a refused global
put("allowed_wrapping_refused.pkl",
    P2 + b"ccollections\nOrderedDict\ncsubprocess\nPopen\n\x85R.")
# protocol 0 INST: builds os.system('ls') without GLOBAL
put("inst_opcode.pkl", b"(\x8c\x02lsios\nsystem\n.")
# 10,000 nested lists: 10,000 MARKs, an empty list, 10,000 LISTs
put("nested_10000.pkl", P2 + b"(" * 10000 + b"]" + b"l" * 10000 + b".")


# ---------------------------------------------------------------- zips by hand
def le16(x): return struct.pack("<H", x)
def le32(x): return struct.pack("<I", x)
def le64(x): return struct.pack("<Q", x)


def zip_bytes(records, cd_override=None, extra_cd=None, method=0, tail=None):
    """records: [(name, data)] stored entries; cd_override(i, dict) may change a central entry's
    fields (name, crc, size, offset, extra, method); extra_cd: more central entries (dicts)."""
    out = b""
    cd = []
    for name, data in records:
        off = len(out)
        nb = name.encode()
        crc = zlib.crc32(data)
        out += (le32(0x04034B50) + le16(20) + le16(0) + le16(method) + le32(0) + le32(crc)
                + le32(len(data)) + le32(len(data)) + le16(len(nb)) + le16(0) + nb + data)
        cd.append(dict(name=nb, crc=crc, size=len(data), csize=len(data), offset=off, extra=b"",
                       method=method))
    for i, e in enumerate(cd):
        if cd_override:
            cd_override(i, e)
    cd += extra_cd or []
    cd_off = len(out)
    c = b""
    for e in cd:
        c += (le32(0x02014B50) + le16(20) + le16(20) + le16(0) + le16(e["method"]) + le32(0)
              + le32(e["crc"]) + le32(e["csize"]) + le32(e["size"]) + le16(len(e["name"]))
              + le16(len(e["extra"])) + le16(0) + le16(0) + le16(0) + le32(0) + le32(e["offset"])
              + e["name"] + e["extra"])
    out += c
    if tail is not None:
        return out + tail(cd_off, len(c), len(cd), len(out))
    out += (le32(0x06054B50) + le16(0) + le16(0) + le16(len(cd)) + le16(len(cd)) + le32(len(c))
            + le32(cd_off) + le16(0))
    return out


def tensor_pickle(offset, shape, stride, key=b"0", numel=4):
    """{'t': _rebuild_tensor_v2(storage(FloatStorage, key, 'cpu', numel), offset, shape,
    stride, False, OrderedDict())} in protocol 2, as torch writes it."""
    def tup(xs):
        return b"(" + b"".join(b"J" + struct.pack("<i", x) if -2**31 <= x < 2**31
                                 else b"\x8a\x08" + struct.pack("<q", x) for x in xs) + b"t"
    p = P2 + b"}X\x01\x00\x00\x00tctorch._utils\n_rebuild_tensor_v2\n("
    p += (b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX" + le32(len(key)) + key
          + b"X\x03\x00\x00\x00cpu" + b"J" + struct.pack("<i", numel) + b"tQ")
    p += b"J" + struct.pack("<i", offset) + tup(shape) + tup(stride)
    p += b"\x89ccollections\nOrderedDict\n)RtRs."
    return p


def torch_zip(pkl, storages=((b"0", b"\0" * 16),), extra=(), **kw):
    recs = [("archive/data.pkl", pkl), ("archive/byteorder", b"little")]
    recs += [("archive/data/" + k.decode(), d) for k, d in storages]
    recs += list(extra)
    recs += [("archive/version", b"3\n")]
    return zip_bytes(recs, **kw)


put("tensor_ok.pt", torch_zip(tensor_pickle(0, [4], [1])))
put("tensor_offset_past_storage.pt", torch_zip(tensor_pickle(10, [2], [1])))
put("tensor_stride_past_storage.pt", torch_zip(tensor_pickle(0, [3], [100])))
put("tensor_stride_overflow.pt", torch_zip(tensor_pickle(0, [2**62, 2], [2**62, 1])))
put("tensor_negative_shape.pt", torch_zip(tensor_pickle(0, [-3], [1])))
put("tensor_storage_size_lie.pt", torch_zip(tensor_pickle(0, [4], [1], numel=2**30)))
put("tensor_missing_record.pt", torch_zip(tensor_pickle(0, [4], [1], key=b"7")))


def flip_first_storage_bit(b):
    i = b.index(b"archive/data/0") + len("archive/data/0")
    b = bytearray(b)
    b[i] ^= 0x01
    return bytes(b)


put("crc_mismatch.pt", flip_first_storage_bit(torch_zip(tensor_pickle(0, [4], [1]))))

ok = tensor_pickle(0, [4], [1])


def rename(target):
    def f(i, e):
        if i == 2:
            e["name"] = target
    return f


# central names: ../, absolute, duplicate (the local header says the same, so only the name is wrong)
def named(name, dup=False):
    recs = [("archive/data.pkl", ok), ("archive/byteorder", b"little"), (name, b"\0" * 16),
            ("archive/version", b"3\n")]
    if dup:
        recs.append((name, b"\0" * 16))
    return zip_bytes(recs)


put("zip_dotdot_name.pt", named("archive/../../etc/cron.d/evil"))
put("zip_absolute_name.pt", named("/etc/passwd"))
put("zip_duplicate_name.pt", named("archive/data/0", dup=True))

# deflate bomb: 10 MB of zeros compressed to ~10 KB; refused before inflating anything
comp = zlib.compressobj(9, zlib.DEFLATED, -15)
bomb = comp.compress(b"\0" * (10 << 20)) + comp.flush()


def deflated(i, e):
    if i == 2:
        e["method"] = 8
        e["size"] = 10 << 20


recs = [("archive/data.pkl", ok), ("archive/byteorder", b"little"), ("archive/data/0", bomb),
        ("archive/version", b"3\n")]
put("zip_deflate_bomb.pt", zip_bytes(recs, cd_override=deflated))

# overlapping bomb: data/0's bytes hold data/1's local header and data; both point into them
inner = (le32(0x04034B50) + le16(20) + le16(0) + le16(0) + le32(0) + le32(0) + le32(16) + le32(16)
         + le16(14) + le16(0) + b"archive/data/1" + b"\0" * 16)
recs = [("archive/data.pkl", ok), ("archive/byteorder", b"little"), ("archive/data/0", inner),
        ("archive/version", b"3\n")]
base = zip_bytes(recs)
off0 = base.index(b"archive/data/0") - 30
inner_off = off0 + 30 + 14


def overlap_extra():
    return [dict(name=b"archive/data/1", crc=zlib.crc32(b"\0" * 16), size=16, csize=16,
                 offset=inner_off, extra=b"", method=0)]


put("zip_overlapping_records.pt", zip_bytes(recs, extra_cd=overlap_extra()))


# zip64: a size of 2**40 in the zip64 field of a 1 KB file; a size that wraps 64 bits
def zip64_size(size):
    def f(i, e):
        if i == 2:
            e["size"] = e["csize"] = 0xFFFFFFFF
            e["extra"] = le16(1) + le16(16) + le64(size) + le64(size)
    return f


put("zip64_size_past_end.pt", torch_zip(ok, cd_override=zip64_size(2**40)))
put("zip64_size_wraps.pt", torch_zip(ok, cd_override=zip64_size(2**64 - 8)))


def zip64_tail(n, cd_size, cd_off_override=None):
    def tail(cd_off, cd_len, count, pos):
        z64 = (le32(0x06064B50) + le64(44) + le16(45) + le16(45) + le32(0) + le32(0) + le64(n)
               + le64(n) + le64(cd_size) + le64(cd_off if cd_off_override is None else cd_off_override))
        loc = le32(0x07064B50) + le32(0) + le64(pos) + le32(1)
        eocd = (le32(0x06054B50) + le16(0) + le16(0) + le16(0xFFFF) + le16(0xFFFF)
                + le32(0xFFFFFFFF) + le32(0xFFFFFFFF) + le16(0))
        return z64 + loc + eocd
    return tail


put("zip64_directory_past_end.pt", torch_zip(ok, tail=zip64_tail(4, 2**50)))
put("zip64_entry_count_lie.pt", torch_zip(ok, tail=zip64_tail(2**40, 300)))

# ---------------------------------------------------------------- safetensors


def st(header, data, n=None):
    h = header.encode()
    h += b" " * (-len(h) % 8)
    return le64(len(h) if n is None else n) + h + data


put("st_overlap.safetensors", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                 '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', b"\0" * 12))
put("st_past_end.safetensors", st('{"a":{"dtype":"F32","shape":[256],"data_offsets":[0,1024]}}',
                                  b"\0" * 8))
put("st_header_len_huge.safetensors", st('{}', b"", n=2**63))
put("st_header_past_end.safetensors", st('{}', b"", n=50000))
put("st_duplicate_name.safetensors", st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                        '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8))
put("st_huge_dim.safetensors", st('{"a":{"dtype":"F32","shape":[0,18446744073709551615],'
                                  '"data_offsets":[0,0]}}', b""))
put("st_offsets_wrap.safetensors", st('{"a":{"dtype":"U8","shape":[1],'
                                      '"data_offsets":[18446744073709551615,0]}}', b"\0"))
