#!/usr/bin/env python3
"""Independent check of the forge's Xpress compressors: dissect.util (PyPI, used as a black box)
decodes every `forge --xpress DIR` encoding back to its plain text.

    xpress_check.py DIR

DIR holds NAME.bin (plain), NAME.lz77 (Plain LZ77) and NAME.huff (LZ77+Huffman), [MS-XCA].
dissect.util's decoders take no output size: its LZ77+Huffman decoder runs until its read
position reaches the end of the input, reading the end-of-stream symbol as a match when input
is left, and stopping before the last symbols when its look-ahead reaches the end first. So a
Huffman stream passes when dissect's output starts with the plain text, as given or with 4 or 8
zero bytes appended (the padding is counted and printed). Calibration: the [MS-XCA] §3.2
example itself decodes to 26 letters + "zzz" in dissect. Exits non-zero on any mismatch.
"""
import os
import sys

from dissect.util.compression import lzxpress, lzxpress_huffman


def spec_alphabet() -> bytes:
    table = bytearray(256)
    table[48] = 0x50
    table[49:59] = b"\x55" * 10
    table[59:62] = b"\x45\x44\x04"
    table[128] = 0x04
    return bytes(table) + bytes.fromhex("d8523ed794115be9195ff9d67cdf8d0400000000")


def main() -> int:
    d = sys.argv[1]
    failures = 0
    calib = lzxpress_huffman.decompress(spec_alphabet())
    print(f"calibration: dissect decodes the [MS-XCA] 3.2 example to {calib!r}")
    if not calib.startswith(b"abcdefghijklmnopqrstuvwxyz"):
        print("FAIL: calibration")
        failures += 1
    names = sorted(f[:-4] for f in os.listdir(d) if f.endswith(".bin"))
    exact = padded = 0
    for name in names:
        plain = open(os.path.join(d, name + ".bin"), "rb").read()
        c = open(os.path.join(d, name + ".lz77"), "rb").read()
        out = lzxpress.decompress(c)
        if out != plain:
            print(f"FAIL {name}.lz77: dissect gives {len(out)} bytes, plain is {len(plain)}")
            failures += 1
        c = open(os.path.join(d, name + ".huff"), "rb").read()
        done = None
        for pad in (0, 4, 8):
            try:
                out = lzxpress_huffman.decompress(c + b"\0" * pad)
            except Exception as e:  # noqa: BLE001 - a black box: any failure is a mismatch
                out = repr(e).encode()
            if out[: len(plain)] == plain:
                done = (pad, len(out) - len(plain))
                break
        if done is None:
            print(f"FAIL {name}.huff: dissect's output differs from the plain text")
            failures += 1
            continue
        pad, extra = done
        exact += extra == 0 and pad == 0
        padded += pad > 0
        print(f"ok {name}: {len(plain)} bytes; lz77 {os.path.getsize(os.path.join(d, name + '.lz77'))},"
              f" huff {len(c)} (dissect: +{pad} padding, {extra} bytes past the end)")
    print(f"xpress_check: {len(names)} texts, {len(names)} Plain LZ77 and {len(names)} LZ77+Huffman"
          f" decoded by dissect.util; Huffman exact {exact}, needing padding {padded}; {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
