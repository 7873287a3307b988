"""CRC-32C (Castagnoli) of many byte spans at once, with numpy: TFRecord's checksum.

TensorBoard event files checksum every record's length and data with a masked CRC-32C. A
byte-at-a-time loop in Python checks about 2 MB/s (tensorboard's own reader is that loop);
here the spans are checked together instead. The CRC register update is linear over GF(2), so
a span's CRC is the XOR, over its bytes, of a table entry chosen by the byte and by its distance
to the span's end (`_Z[d, b]`: byte `b` followed by `d` zero bytes), XORed with the CRC of as
many zero bytes (the effect of the register's initial value). Spans longer than the table are
cut into pieces whose CRCs are chained (`_extend`), a Python step per KiB.
"""

from __future__ import annotations

from functools import cache

import numpy as np

POLY = 0x82F63B78  # CRC-32C, reflected
TABLE_SPAN = 1024  # the longest piece the position table covers (1 MiB of uint32)
BATCH_BYTES = 1 << 20  # bytes looked up per numpy pass (bounds the temporary arrays)
_MASK_DELTA = 0xA282EAD8


@cache
def _tables() -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """(Z, zeros, shift): Z[d, b] is the register (from 0) after byte b and d zero bytes;
    zeros[n] the CRC-32C of n zero bytes (n ≤ TABLE_SPAN); shift[i][b] the register (from
    `b << 8i`) after TABLE_SPAN zero bytes, for chaining pieces."""
    byte = np.arange(256, dtype=np.uint32)
    t = byte.copy()
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(POLY), t >> 1).astype(np.uint32)
    z = np.empty((TABLE_SPAN, 256), dtype=np.uint32)
    z[0] = t
    for d in range(1, TABLE_SPAN):
        z[d] = t[z[d - 1] & 0xFF] ^ (z[d - 1] >> 8)
    zeros = np.empty(TABLE_SPAN + 1, dtype=np.uint32)
    reg = np.uint32(0xFFFFFFFF)
    zeros[0] = 0
    for n in range(1, TABLE_SPAN + 1):
        reg = t[reg & 0xFF] ^ (reg >> np.uint32(8))
        zeros[n] = reg ^ np.uint32(0xFFFFFFFF)
    shift = []
    for i in range(4):
        reg_v = byte << np.uint32(8 * i)
        for _ in range(TABLE_SPAN):
            reg_v = t[reg_v & 0xFF] ^ (reg_v >> 8)
        shift.append([int(v) for v in reg_v])
    return z, zeros, shift


def _pieces_register(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The register (from 0) after each piece (each at most TABLE_SPAN bytes)."""
    z, _, _ = _tables()
    flat = z.reshape(-1)
    out = np.zeros(starts.size, dtype=np.uint32)
    ends = np.cumsum(lengths)
    first = 0
    while first < starts.size:  # batches of about BATCH_BYTES bytes
        base = int(ends[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(ends, base + BATCH_BYTES, side="right")))
        s, n = starts[first:last], lengths[first:last]
        keep = n > 0
        s, n = s[keep], n[keep]
        if n.size:
            offsets = np.cumsum(n) - n  # each piece's first byte in the batch
            within = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(offsets, n)
            at = np.repeat(s, n) + within
            dist = np.repeat(n, n) - 1 - within
            values = flat[dist * 256 + buf[at]]
            out[first:last][keep] = np.bitwise_xor.reduceat(values, offsets)
        first = last
    return out


def crc32c(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The CRC-32C of each span `buf[start:start + length]` (buf: uint8; spans may overlap)."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    _, zeros, _ = _tables()
    out = np.zeros(starts.size, dtype=np.uint32)
    short = lengths <= TABLE_SPAN
    out[short] = (_pieces_register(buf, starts[short], lengths[short])
                  ^ zeros[lengths[short]])
    for i in np.flatnonzero(~short):
        out[i] = _long_crc32c(buf, int(starts[i]), int(lengths[i]))
    return out


def _long_crc32c(buf: np.ndarray, start: int, length: int) -> int:
    """A span longer than TABLE_SPAN: the first (partial) piece, then whole pieces, chained."""
    head = length % TABLE_SPAN or TABLE_SPAN
    piece_starts = np.concatenate(([start], np.arange(start + head, start + length, TABLE_SPAN)))
    piece_lengths = np.full(piece_starts.size, TABLE_SPAN, dtype=np.int64)
    piece_lengths[0] = head
    registers = _pieces_register(buf, piece_starts, piece_lengths)
    _, zeros, _ = _tables()
    reg = int(zeros[head]) ^ 0xFFFFFFFF ^ int(registers[0])  # after the first piece, from ~0
    for r in registers[1:].tolist():
        reg = _extend(reg) ^ r
    return reg ^ 0xFFFFFFFF


def _extend(reg: int) -> int:
    """The register after TABLE_SPAN more zero bytes (linear: one table per register byte)."""
    shift = _tables()[2]
    return (shift[0][reg & 0xFF] ^ shift[1][(reg >> 8) & 0xFF]
            ^ shift[2][(reg >> 16) & 0xFF] ^ shift[3][reg >> 24])


def masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's mask of a CRC-32C (rotated right by 15, plus a constant)."""
    crc = crc.astype(np.uint64)
    rotated = ((crc >> 15) | (crc << 17)) & 0xFFFFFFFF
    return ((rotated + _MASK_DELTA) & 0xFFFFFFFF).astype(np.uint32)


def le_u32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each offset `at` of `buf` (offsets need no alignment)."""
    at = np.asarray(at, dtype=np.int64)
    b = [buf[at + k].astype(np.uint32) for k in range(4)]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
