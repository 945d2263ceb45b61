"""The ``files`` partition's FILE_LIST records decoded at once into columns, for wide listings.

A FILE_LIST value is the Avro binary of a ``HoodieMetadataRecord`` (``records.metadata_schema``):
five ``["null", string]`` meta fields, ``key`` (string), ``type`` (int), ``filesystemMetadata``
(``["null", map<HoodieMetadataFileInfo{size: long, isDeleted: boolean}>]``), then four
``["null", record]`` fields that a files record leaves null. Decoding ten thousand of them one by
one builds a dict per record and per file; here every record is walked at once, one map entry per
step across all records (numpy over the records' read positions), and the file names are cut out
of the values' bytes as one Arrow array.

The layout is Hudi's ``HoodieMetadataRecord`` (hudi-common ``HoodieMetadata.avsc``, read by
``HoodieMetadataPayload``); a map's blocks are Avro's (``org.apache.avro.io.BinaryDecoder``
``readMapStart``/``mapNext``): a count, negative when the block's byte size follows, until a zero.

Records this walk does not take (another type, a map of more than ``MAX_ENTRIES`` entries, bytes
that do not follow the layout) are reported back, for :func:`hoodie.metadata.records.decode_payload`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.metadata.records import RecordType
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

MAX_ENTRIES = 4096
"""Records with a longer map (e.g. a huge partition) are left to the one-by-one decoder: each
step of the walk costs the same however few records are still in it."""

_TRAILING_NULLS = 4  # BloomFilterMetadata, ColumnStatsMetadata, recordIndexMetadata, SecondaryIndexMetadata
_MAX_VARINT = 10  # bytes of a 64-bit varint
_PAD = bytes(_MAX_VARINT + 1)


@dataclass(frozen=True)
class FileListColumns:
    """Map entries of the records decoded, in record order then map order."""

    record: Ints
    """The index (into the values given) of each entry's record."""
    name: pa.StringArray
    size: Ints
    deleted: Mask
    taken: Mask
    """Per value: decoded here (False: left to ``decode_payload``)."""


def _varints(buf: npt.NDArray[np.uint8], pos: Ints) -> tuple[Ints, Ints, Mask]:
    """The zigzag varints (Avro int/long) at ``pos``, the positions after them, and which were
    longer than a long may be."""
    out = np.zeros(len(pos), dtype=np.uint64)
    cur = pos.copy()
    more = np.ones(len(pos), dtype=bool)
    for k in range(_MAX_VARINT):
        byte = buf[cur].astype(np.uint64)
        out |= np.where(more, (byte & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        cur += more
        more &= byte >= 0x80
        if not more.any():
            break
    # Zigzag: shifted as unsigned (a long's top bit is data, not sign).
    value = (out >> np.uint64(1)).view(np.int64) ^ -(out & np.uint64(1)).view(np.int64)
    return value, cur, more


def decode_file_lists(values: Sequence[bytes]) -> FileListColumns:
    """The map entries of the FILE_LIST records among ``values`` (HFile values written with the
    reader's own schema), and which values were decoded."""
    count = len(values)
    lengths = np.fromiter((len(v) for v in values), dtype=np.int64, count=count)
    ends = np.cumsum(lengths)
    data = b"".join(values)
    buf = np.frombuffer(data + _PAD, dtype=np.uint8)
    pos = ends - lengths
    ok = np.ones(count, dtype=bool)

    def step(at: Ints, rows: Ints) -> tuple[Ints, Ints]:
        """Varints at ``at`` (positions of ``rows``); rows that overrun their value fail."""
        value, after, long = _varints(buf, np.minimum(at, ends[rows]))
        ok[rows[long | (after > ends[rows])]] = False
        return value, np.minimum(after, ends[rows])

    every = np.arange(count, dtype=np.int64)
    for _ in HOODIE_META_COLUMNS:  # ["null", string]: index 0, or 1 and a string
        branch, pos = step(pos, every)
        ok &= (branch == 0) | (branch == 1)
        strings = np.flatnonzero(branch == 1)
        if len(strings):
            length, after = step(pos[strings], strings)
            pos[strings] = np.minimum(after + np.maximum(length, 0), ends[strings])
    length, pos = step(pos, every)  # key
    pos = np.minimum(pos + np.maximum(length, 0), ends)
    record_type, pos = step(pos, every)
    branch, pos = step(pos, every)
    ok &= (record_type == RecordType.FILE_LIST) & ((branch == 0) | (branch == 1))

    records: list[Ints] = []
    starts: list[Ints] = []
    stops: list[Ints] = []
    sizes: list[Ints] = []
    flags: list[npt.NDArray[np.uint8]] = []
    remaining = np.zeros(count, dtype=np.int64)
    active = np.flatnonzero(ok & (branch == 1))
    entries = np.zeros(count, dtype=np.int64)
    while len(active):
        fresh = active[remaining[active] == 0]
        if len(fresh):  # a block starts: its count (negative: followed by its byte size)
            block, after = step(pos[fresh], fresh)
            sized = np.flatnonzero(block < 0)
            if len(sized):
                _, after[sized] = step(after[sized], fresh[sized])
            pos[fresh] = after
            remaining[fresh] = np.abs(block)
            entries[fresh] += np.abs(block)
            ok[fresh[entries[fresh] > MAX_ENTRIES]] = False
            active = active[(remaining[active] > 0) & ok[active]]
            if not len(active):
                break
        length, at = step(pos[active], active)
        name_end = at + np.maximum(length, 0)
        size, after = step(np.minimum(name_end, ends[active]), active)
        flag = buf[after]
        ok[active[(flag > 1) | (after >= ends[active])]] = False
        records.append(active)
        starts.append(at)
        stops.append(name_end)
        sizes.append(size)
        flags.append(flag)
        pos[active] = np.minimum(after + 1, ends[active])
        remaining[active] -= 1
        active = active[ok[active]]
    # What follows the map: its end (a zero count, consumed above) and four null branches.
    ok &= pos + _TRAILING_NULLS == ends
    tail = np.flatnonzero(ok)
    for k in range(_TRAILING_NULLS):
        ok[tail[buf[pos[tail] + k] != 0]] = False

    if records:
        record = np.concatenate(records)
        order = np.argsort(record, kind="stable")  # by record, each record's entries in map order
        record = record[order]
        keep = ok[record]
        order, record = order[keep], record[keep]
        start, stop = np.concatenate(starts)[order], np.concatenate(stops)[order]
        size = np.concatenate(sizes)[order]
        deleted = np.concatenate(flags)[order] == 1
    else:
        record = start = stop = size = np.zeros(0, dtype=np.int64)
        deleted = np.zeros(0, dtype=bool)
    return FileListColumns(record, _names(data, start, stop), size, deleted, ok)


def _names(data: bytes, start: Ints, stop: Ints) -> pa.StringArray:
    """The strings at ``[start, stop)`` of ``data`` (ascending, not overlapping) as one array:
    every second element of a binary array whose offsets alternate between them and the gaps."""
    offsets = np.empty(2 * len(start) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1::2] = start
    offsets[2::2] = stop
    spans = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 2 * len(start), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    picked = spans.take(pa.array(np.arange(1, 2 * len(start), 2, dtype=np.int64)))
    try:
        return picked.cast(pa.large_string()).cast(pa.string())
    except pa.ArrowInvalid as e:
        raise ValueError(f"metadata table files record holds a file name that is not UTF-8: {e}") from e
