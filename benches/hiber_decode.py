#!/usr/bin/env python3
"""Decompress every compression set of a hibernation file with an independent Xpress decoder
(benches/hiberfil.rs): the set list comes from the forge's truth (SETS.json: offset, data
offset, compressed size, pages, method, stored), not from etwdump. Prints one JSON line:
{"decoder", "sets", "bytes_out", "seconds"} (the decode loop alone, the file already mapped).

usage: hiber_decode.py SETS.json FILE DECODER   (DECODER: xpress_lz77 | dissect)
"""
import json
import mmap
import sys
import time


def main():
    sets_path, path, decoder = sys.argv[1:4]
    with open(sets_path) as f:
        sets = json.load(f)["sets"]
    if decoder == "xpress_lz77":
        import xpress_lz77

        def huff(data, n):
            return xpress_lz77.lz77_huffman_decompress_py(data, n)

        def plain(data, n):
            return xpress_lz77.lz77_plain_decompress_py(data)

    elif decoder == "dissect":
        from dissect.util.compression import lzxpress, lzxpress_huffman

        def huff(data, n):
            return lzxpress_huffman.decompress(data)

        def plain(data, n):
            return lzxpress.decompress(data)

    else:
        sys.exit(f"unknown decoder {decoder}")
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        out = 0
        t = time.perf_counter()
        for s in sets:
            o, n = s["data_offset"], s["compressed_size"]
            want = s["pages"] * 4096
            data = m[o : o + n]
            if s["stored"]:
                got = len(data)
            elif s["method"] >= 2:
                got = len(huff(data, want))
            else:
                got = len(plain(data, want))
            if got < want:
                sys.exit(f"set at {s['offset']:#x}: {got} bytes, not {want}")
            out += want
        dt = time.perf_counter() - t
    print(json.dumps({"decoder": decoder, "sets": len(sets), "bytes_out": out, "seconds": dt}))


if __name__ == "__main__":
    main()
