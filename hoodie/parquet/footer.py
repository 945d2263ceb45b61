"""A Parquet file's footer as Thrift structs, and the field ids of ``parquet.thrift`` it uses.

A file is ``PAR1 | column chunks | FileMetaData (compact Thrift) | u32 LE footer length | PAR1``
(``PARE`` at the end marks an encrypted footer, which is not read here). Each ``ColumnChunk``
holds its ``ColumnMetaData``, whose ``dictionary_page_offset`` (when there is a dictionary page)
or else ``data_page_offset`` is where the chunk's pages start; ``total_compressed_size`` covers
every page with its header, so ``file[start : start + total_compressed_size]`` is the chunk.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hoodie.errors import CorruptFileError
from hoodie.parquet.thrift import BINARY, LIST, STRUCT, Struct, TList, decode_struct, encode_struct

MAGIC = b"PAR1"

# FileMetaData
FMD_VERSION, FMD_SCHEMA, FMD_NUM_ROWS, FMD_ROW_GROUPS, FMD_KEY_VALUE, FMD_CREATED_BY = 1, 2, 3, 4, 5, 6
FMD_ENCRYPTION = 8
# SchemaElement
SE_TYPE, SE_REPETITION, SE_NAME, SE_NUM_CHILDREN, SE_CONVERTED_TYPE, SE_LOGICAL_TYPE = 1, 3, 4, 5, 6, 10
# RowGroup
RG_COLUMNS, RG_TOTAL_BYTE_SIZE, RG_NUM_ROWS, RG_FILE_OFFSET, RG_TOTAL_COMPRESSED, RG_ORDINAL = (
    1,
    2,
    3,
    5,
    6,
    7,
)
# ColumnChunk
CC_FILE_PATH, CC_FILE_OFFSET, CC_META = 1, 2, 3
CC_OFFSET_INDEX = (4, 5)  # offset_index_offset, offset_index_length
CC_COLUMN_INDEX = (6, 7)
CC_CRYPTO = (8, 9)  # crypto_metadata, encrypted_column_metadata
# ColumnMetaData
CM_TYPE, CM_PATH, CM_CODEC, CM_NUM_VALUES, CM_UNCOMPRESSED, CM_COMPRESSED = 1, 3, 4, 5, 6, 7
CM_DATA_PAGE_OFFSET, CM_INDEX_PAGE_OFFSET, CM_DICTIONARY_PAGE_OFFSET = 9, 10, 11
CM_BLOOM_FILTER = (14, 15)  # bloom_filter_offset, bloom_filter_length

# parquet.thrift enums
BYTE_ARRAY = 6
INT32, INT64, INT96 = 1, 2, 3
REQUIRED, OPTIONAL, REPEATED = 0, 1, 2
CONVERTED_DECIMAL, CONVERTED_LIST = 5, 3
LOGICAL_DECIMAL = 5  # LogicalType union member id
CODECS = {0: "uncompressed", 1: "snappy", 2: "gzip", 3: "lzo", 4: "brotli", 5: "lz4", 6: "zstd", 7: "lz4_raw"}


def read_footer(data: bytes | memoryview, what: str) -> Struct:
    """The ``FileMetaData`` of the Parquet file whose bytes are ``data`` (``what`` names it in errors)."""
    if len(data) < 12 or bytes(data[:4]) != MAGIC:
        raise CorruptFileError(f"{what} is not a Parquet file (no leading {MAGIC!r})")
    tail = bytes(data[-4:])
    if tail == b"PARE":
        raise CorruptFileError(f"{what} has an encrypted Parquet footer")
    if tail != MAGIC:
        raise CorruptFileError(f"{what} is not a complete Parquet file (ends with {tail!r})")
    (length,) = struct.unpack("<I", bytes(data[-8:-4]))
    start = len(data) - 8 - length
    if start < 4:
        raise CorruptFileError(f"{what}: footer length {length} does not fit the file of {len(data)} bytes")
    meta, end = decode_struct(data, start)
    if end != len(data) - 8:
        raise CorruptFileError(f"{what}: footer ends at byte {end}, expected {len(data) - 8}")
    return meta


def footer_bytes(meta: Struct) -> bytes:
    """The file's tail for ``meta``: the encoded footer, its length and the magic."""
    body = encode_struct(meta)
    return body + struct.pack("<I", len(body)) + MAGIC


def key_values(meta: Struct) -> dict[str, str]:
    out: dict[str, str] = {}
    for kv in meta.get_list(FMD_KEY_VALUE):
        assert isinstance(kv, Struct)
        key, value = kv.get(1), kv.get(2)
        if isinstance(key, bytes):
            out[key.decode()] = value.decode() if isinstance(value, bytes) else ""
    return out


def set_key_values(meta: Struct, values: dict[str, str]) -> None:
    items: list[object] = []
    for key, value in values.items():
        kv = Struct()
        kv.set(1, BINARY, key.encode())
        kv.set(2, BINARY, value.encode())
        items.append(kv)
    meta.set(FMD_KEY_VALUE, LIST, TList(STRUCT, items))  # type: ignore[arg-type]


def text(s: Struct, fid: int) -> str | None:
    value = s.get(fid)
    return value.decode() if isinstance(value, bytes) else None


@dataclass(frozen=True, slots=True)
class Column:
    """One leaf column of a file schema: its path, physical type and repetition."""

    path: tuple[str, ...]
    physical_type: int
    repetition: int
    max_definition: int
    max_repetition: int


def leaf_columns(meta: Struct) -> list[Column]:
    """The schema's leaves in order (the order of every row group's column chunks)."""
    elements = [e for e in meta.get_list(FMD_SCHEMA) if isinstance(e, Struct)]
    out: list[Column] = []
    pos = 1  # element 0 is the root

    def walk(count: int, prefix: tuple[str, ...], dlevel: int, rlevel: int) -> None:
        nonlocal pos
        for _ in range(count):
            if pos >= len(elements):
                raise CorruptFileError("the Parquet schema lists fewer elements than its children counts say")
            element = elements[pos]
            pos += 1
            name = text(element, SE_NAME) or ""
            repetition = element.get_int(SE_REPETITION, REQUIRED)
            d = dlevel + (repetition != REQUIRED)
            r = rlevel + (repetition == REPEATED)
            children = element.get_int(SE_NUM_CHILDREN, 0)
            if children:
                walk(children, (*prefix, name), d, r)
            else:
                out.append(Column((*prefix, name), element.get_int(SE_TYPE), repetition, d, r))

    if elements:
        walk(elements[0].get_int(SE_NUM_CHILDREN, 0), (), 0, 0)
    return out


def chunk_range(meta: Struct) -> tuple[int, int]:
    """``(start, length)`` of a column chunk's pages, from its ``ColumnMetaData``."""
    data_offset = meta.get_int(CM_DATA_PAGE_OFFSET)
    dictionary = meta.get(CM_DICTIONARY_PAGE_OFFSET)
    # Some writers put 0 (or a bogus offset) here when there is no dictionary page.
    start = dictionary if isinstance(dictionary, int) and 0 < dictionary < data_offset else data_offset
    return start, meta.get_int(CM_COMPRESSED)
