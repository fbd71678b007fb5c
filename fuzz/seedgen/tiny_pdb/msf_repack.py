#!/usr/bin/env python3
"""Rewrite an MSF 7.00 file (a PDB) with a smaller block size, same streams, same bytes.

usage: msf_repack.py IN.pdb OUT.pdb [BLOCK_SIZE]      (default 512)

lld-link writes 4096-byte blocks (its /pdbpagesize: takes 4096 and up), so a PDB of a few
KB of streams is ~70 KB, mostly padding: a fuzzer mutating it wastes most mutations there.
With 512-byte blocks the same PDB is a few times smaller. Layout written: block 0 the
superblock, blocks 1 and 2 the free-block maps (and every BLOCK_SIZE-th block after, as the
format wants), the streams in order, the directory, the block map. The file is padded to at
least 4096 bytes (the `pdb` crate reads a 4096-byte header page).
"""
import struct
import sys

MAGIC = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\x00\x00\x00"


def read_streams(data):
    if data[:32] != MAGIC:
        raise SystemExit("not an MSF 7.00 file")
    bs, _fpm, _nblocks, dir_bytes, _unk, block_map = struct.unpack_from("<6I", data, 32)
    ndir = (dir_bytes + bs - 1) // bs
    dir_blocks = struct.unpack_from(f"<{ndir}I", data, block_map * bs)
    d = b"".join(data[b * bs:(b + 1) * bs] for b in dir_blocks)[:dir_bytes]
    n = struct.unpack_from("<I", d, 0)[0]
    sizes = struct.unpack_from(f"<{n}I", d, 4)
    pos = 4 + 4 * n
    out = []
    for sz in sizes:
        real = 0 if sz == 0xFFFFFFFF else sz
        k = (real + bs - 1) // bs
        blocks = struct.unpack_from(f"<{k}I", d, pos)
        pos += 4 * k
        body = b"".join(data[b * bs:(b + 1) * bs] for b in blocks)[:real]
        out.append((sz, body))
    return out


def write(streams, bs):
    blocks = {}  # index -> bytes
    nxt = [3]

    def alloc():
        while nxt[0] % bs in (1, 2):  # free-block-map blocks of each interval
            nxt[0] += 1
        b = nxt[0]
        nxt[0] += 1
        return b

    def put(data):
        lst = []
        for i in range(0, len(data), bs):
            b = alloc()
            blocks[b] = data[i:i + bs]
            lst.append(b)
        return lst

    lists = [put(body) for _, body in streams]
    d = struct.pack("<I", len(streams))
    d += b"".join(struct.pack("<I", sz) for sz, _ in streams)
    d += b"".join(struct.pack(f"<{len(l)}I", *l) for l in lists)
    dir_list = put(d)
    if 4 * len(dir_list) > bs:
        raise SystemExit("directory too large for one block-map block")
    block_map = alloc()
    blocks[block_map] = struct.pack(f"<{len(dir_list)}I", *dir_list)
    nblocks = max(nxt[0], (4096 + bs - 1) // bs)
    out = bytearray(nblocks * bs)
    out[:56] = MAGIC + struct.pack("<6I", bs, 1, nblocks, len(d), 0, block_map)
    # Free-block map 1 (the active one; bit set = free): every block of the file is used.
    if nblocks > bs * 8:
        raise SystemExit("file too large for a one-block free-block map")
    fpm = bytearray(b"\xff" * bs)
    for i in range(nblocks):
        fpm[i // 8] &= ~(1 << (i % 8)) & 0xFF
    out[bs:2 * bs] = fpm
    for b, data in blocks.items():
        out[b * bs:b * bs + len(data)] = data
    return bytes(out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    bs = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    streams = read_streams(open(src, "rb").read())
    out = write(streams, bs)
    if read_streams(out) != [(sz, body) for sz, body in streams]:
        raise SystemExit("repack check failed")
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
