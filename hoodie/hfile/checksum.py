"""HFile block checksums: CRC32C (Castagnoli) and CRC32 over fixed-size chunks.

An HFile v3 block stores one big-endian 4-byte checksum per ``bytesPerChecksum`` (16384) bytes of
header plus on-disk payload; every chunk is checksummed on its own (fresh initial value). The
checksum type byte in the block header is HBase's ``ChecksumType``: 0 NULL (the checksum bytes
are present but meaningless, as Hudi 1.1's own writer leaves them), 1 CRC32, 2 CRC32C.

CRC32 comes from :mod:`zlib`. CRC32C has no implementation among the dependencies, so it is
computed here with numpy, exploiting that a CRC register is linear over GF(2):

* each chunk is cut into ``_LANE``-byte lanes, all lanes of all chunks advance one byte per
  numpy step from a zero register (leading zero bytes leave a zero register unchanged, so a
  short last chunk is left-padded to full size);
* lanes are then merged pairwise, ``reg(A || B) = shift(reg(A), len(B)) ^ reg(B)``, where
  ``shift`` (feeding zero bytes) is applied through four 256-entry tables per length;
* the standard pre- and post-conditioning (init and final xor ``0xFFFFFFFF``) add the constant
  ``shift(0xFFFFFFFF, len) ^ 0xFFFFFFFF`` per chunk.

Short inputs go through the plain table-driven loop, which is faster there.
"""

from __future__ import annotations

import zlib
from enum import IntEnum
from functools import cache

import numpy as np
import numpy.typing as npt

_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK = 0xFFFFFFFF
_LANE = 64  # bytes per lane in the vectorized pass (a power of two)
_SMALL = 2048  # inputs up to this many bytes use the scalar loop

U32 = npt.NDArray[np.uint32]


class ChecksumType(IntEnum):
    """HBase's ``ChecksumType`` codes, as stored in byte 24 of a block header."""

    NULL = 0
    CRC32 = 1
    CRC32C = 2


def _byte_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _byte_table()
_TABLE_NP: U32 = np.array(_TABLE, dtype=np.uint32)


def _register(data: bytes | memoryview, reg: int) -> int:
    """The raw CRC32C register after feeding ``data`` to register ``reg`` (no conditioning)."""
    table = _TABLE
    for b in bytes(data):
        reg = table[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg


def crc32c_scalar(data: bytes | memoryview) -> int:
    """CRC32C of ``data`` by the plain byte-at-a-time table loop (the reference)."""
    return _register(data, _MASK) ^ _MASK


@cache
def _shift_tables(nbytes: int) -> U32:
    """Four 256-entry tables applying "feed ``nbytes`` zero bytes" to a 32-bit register.

    ``shift(r) = t[0][r & 0xFF] ^ t[1][(r >> 8) & 0xFF] ^ t[2][(r >> 16) & 0xFF] ^ t[3][r >> 24]``.
    Built by doubling from one byte, so ``nbytes`` must be a power of two.
    """
    if nbytes == 1:
        basis = np.array([1 << i for i in range(32)], dtype=np.uint32)
        images = _TABLE_NP[basis & 0xFF] ^ (basis >> 8)
    else:
        half = _shift_tables(nbytes // 2)
        basis = np.array([1 << i for i in range(32)], dtype=np.uint32)
        images = _apply_shift(_apply_shift(basis, half), half)
    values = np.arange(256, dtype=np.uint32)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for byte in range(4):
        for bit in range(8):
            selected = ((values >> bit) & 1).astype(bool)
            tables[byte, selected] ^= images[8 * byte + bit]
    return tables


def _apply_shift(regs: U32, tables: U32) -> U32:
    out: U32 = (
        tables[0][regs & 0xFF]
        ^ tables[1][(regs >> 8) & 0xFF]
        ^ tables[2][(regs >> 16) & 0xFF]
        ^ tables[3][regs >> 24]
    )
    return out


def _shift_scalar(reg: int, nbytes: int) -> int:
    """Feed ``nbytes`` zero bytes to ``reg`` (any length, by its binary digits)."""
    power = 1
    while nbytes:
        if nbytes & 1:
            t = _shift_tables(power)
            reg = int(t[0][reg & 0xFF] ^ t[1][(reg >> 8) & 0xFF] ^ t[2][(reg >> 16) & 0xFF] ^ t[3][reg >> 24])
        nbytes >>= 1
        power <<= 1
    return reg


def _chunk_registers(data: bytes | memoryview, chunk: int) -> U32:
    """Raw registers (zero init, no final xor) of every ``chunk``-byte piece of ``data``."""
    n = len(data)
    count = -(-n // chunk)
    padded = np.zeros(count * chunk, dtype=np.uint8)
    full = (n // chunk) * chunk
    src = np.frombuffer(data, dtype=np.uint8)
    padded[:full] = src[:full]
    if full < n:  # right-align the short last chunk: leading zeros keep a zero register at zero
        padded[count * chunk - (n - full) :] = src[full:]
    lanes_per_chunk = chunk // _LANE
    lanes = padded.reshape(count * lanes_per_chunk, _LANE).T.copy()  # row j = byte j of every lane
    regs = np.zeros(count * lanes_per_chunk, dtype=np.uint32)
    for j in range(_LANE):
        regs = _TABLE_NP[(regs ^ lanes[j]) & 0xFF] ^ (regs >> 8)
    width = _LANE
    while width < chunk:
        pairs = regs.reshape(-1, 2)
        regs = _apply_shift(pairs[:, 0].copy(), _shift_tables(width)) ^ pairs[:, 1]
        width *= 2
    return regs


def chunk_crc32c(data: bytes | memoryview, chunk: int) -> list[int]:
    """CRC32C of each consecutive ``chunk``-byte piece of ``data`` (the last may be shorter)."""
    n = len(data)
    if n == 0:
        return []
    if n <= _SMALL or chunk < _LANE or chunk & (chunk - 1):
        view = memoryview(data)
        return [crc32c_scalar(view[i : i + chunk]) for i in range(0, n, chunk)]
    regs = _chunk_registers(data, chunk)
    out = []
    for i, reg in enumerate(regs.tolist()):
        length = min(chunk, n - i * chunk)
        out.append(reg ^ _shift_scalar(_MASK, length) ^ _MASK)
    return out


def crc32c(data: bytes | memoryview) -> int:
    """CRC32C of ``data`` as one message."""
    n = len(data)
    if n <= _SMALL:
        return crc32c_scalar(data)
    size = 1 << (n - 1).bit_length()
    (reg,) = _chunk_registers(data, size).tolist()
    return int(reg) ^ _shift_scalar(_MASK, n) ^ _MASK


def chunk_checksums(kind: ChecksumType, data: bytes | memoryview, chunk: int) -> list[int]:
    """The checksum of each ``chunk``-byte piece of ``data`` as ``kind`` defines it (NULL: zeros)."""
    if kind is ChecksumType.CRC32C:
        return chunk_crc32c(data, chunk)
    view = memoryview(data)
    if kind is ChecksumType.CRC32:
        return [zlib.crc32(view[i : i + chunk]) for i in range(0, len(view), chunk)]
    return [0] * (-(-len(view) // chunk))
