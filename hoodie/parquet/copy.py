"""Stitching base files into one by copying their column chunks, as Hudi 1.1's binary copy does.

Apache Hudi's ``SparkBinaryCopyClusteringExecutionStrategy`` (``HoodieBinaryCopyHandle`` with
``HoodieParquetFileBinaryCopier`` over ``HoodieParquetBinaryCopyBase``) writes one file per
clustering group: every row group of every input, in input order, with each column chunk's
pages copied as they are (re-compressed, never decoded, where a chunk's codec is not the table's
``hoodie.parquet.compression.codec``), except ``_hoodie_file_name``, which is re-encoded with the
output file's name on every row. ``_hoodie_commit_time`` and ``_hoodie_commit_seqno`` keep the
values they had. The footer's key/values are the inputs' merged (``HoodieFileMetadataMerger``):
every input's keys (a later file's value wins), ``hoodie_min_record_key`` / ``..._max_...`` the
least / greatest over the inputs (Java string order), the bloom filters OR-ed; then
``parquet.avro.schema`` and ``org.apache.spark.sql.parquet.row.metadata`` are removed and
``original.created.by`` lists the inputs' writers. Parquet's own page indexes and bloom filters
are not carried over (their offsets would need rewriting); readers do without them.

Whether Hudi copies a plan at all is :mod:`hoodie.parquet.checker`'s (Hudi's
``ParquetBinaryCopyChecker``). Before writing a byte, :func:`plan_binary_copy` checks what copying
one group needs (one schema, one bloom filter type code, no encryption, codecs this module can
re-compress, a plain string ``_hoodie_file_name``); it returns the reason when the inputs do not
qualify, and the caller refuses the plan.

The output codec is parquet-mr's ``CompressionCodecName.fromConf`` of
``hoodie.parquet.compression.codec`` (the enum value of its upper-cased name, Thrift ids below):
``lz4`` is LZ4 (5, Hadoop-framed: :mod:`hoodie.parquet.pages`), not LZ4_RAW; ``lzo`` cannot be
written here; a name that is not a value (``none``) fails in Hudi and is refused here.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_TYPE_FOOTER_KEY,
    BloomFilter,
    deserialize_bloom_filter,
    union_bloom_filters,
)
from hoodie.errors import CorruptFileError, InvalidInputError
from hoodie.file_group.base_file_writer import (
    AVRO_SCHEMA_FOOTER,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
)
from hoodie.io.fileio import FileIO
from hoodie.parquet import footer as f
from hoodie.parquet.pages import (
    ARROW_CODECS,
    LZ4_HADOOP,
    LZ4_RAW,
    WRITABLE_CODECS,
    can_transcode,
    transcode_chunk,
)
from hoodie.parquet.thrift import I32, I64, LIST, STRUCT, Struct, TList, Value, encode_struct
from hoodie.schema.meta_fields import FILENAME_METADATA_FIELD

ORIGINAL_CREATED_BY = "original.created.by"
SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"
CODEC_IDS = {
    "uncompressed": 0,
    "snappy": 1,
    "gzip": 2,
    "lzo": 3,
    "brotli": 4,
    "lz4": 5,
    "zstd": 6,
    "lz4_raw": 7,
}
"""parquet-mr's ``CompressionCodecName`` values (lower-cased) -> the Thrift ``CompressionCodec`` id."""


@dataclass(slots=True)
class _Input:
    path: str
    meta: Struct
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """Inputs that qualify for binary copy, and the output footer's key/values, settled up front."""

    inputs: tuple[str, ...]
    codec: int
    key_values: dict[str, str]
    min_record_key: str | None
    max_record_key: str | None
    num_rows: int
    _metas: tuple[Struct, ...] = field(repr=False, default=())


@dataclass(frozen=True, slots=True)
class CopyResult:
    path: str
    size: int
    num_rows: int
    min_record_key: str | None
    max_record_key: str | None


def codec_id(name: str) -> int:
    """The Parquet codec Hudi writes for ``hoodie.parquet.compression.codec=name``.

    Raises :class:`InvalidInputError` naming the value when Hudi would fail on it (not a
    ``CompressionCodecName``) or it is LZO, which hts cannot write.
    """
    code = CODEC_IDS.get(name.lower())
    if code is None:
        raise InvalidInputError(
            f"hoodie.parquet.compression.codec={name} is not a parquet-mr CompressionCodecName "
            f"(one of {', '.join(CODEC_IDS)}): Apache Hudi fails on it"
        )
    if code not in WRITABLE_CODECS:
        raise InvalidInputError(f"hoodie.parquet.compression.codec={name}: hts cannot write {name} pages")
    return code


def _java_order(key: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order (UTF-16 code units)."""
    return key.encode("utf-16-be", "surrogatepass")


def _schema_refusal(meta: Struct, what: str) -> str | None:
    """What copying needs of the schema: ``_hoodie_file_name`` a plain string, to re-encode it."""
    for column in f.leaf_columns(meta):
        if column.path[0] == FILENAME_METADATA_FIELD and (
            len(column.path) != 1 or column.physical_type != f.BYTE_ARRAY or column.repetition == f.REPEATED
        ):
            return f"{what}: {FILENAME_METADATA_FIELD} is not a plain string column"
    return None


def _chunk_refusal(meta: Struct, codec: int, what: str) -> str | None:
    if meta.get(f.FMD_ENCRYPTION) is not None:
        return f"{what} is encrypted"
    for rg in meta.get_list(f.FMD_ROW_GROUPS):
        assert isinstance(rg, Struct)
        for chunk in rg.get_list(f.RG_COLUMNS):
            assert isinstance(chunk, Struct)
            if chunk.get(f.CC_FILE_PATH) is not None or any(chunk.get(i) is not None for i in f.CC_CRYPTO):
                return f"{what} has an encrypted or external column chunk"
            cm = chunk.get_struct(f.CC_META)
            if cm is None:
                return f"{what} has a column chunk without metadata"
            source = cm.get_int(f.CM_CODEC)
            if source != codec and not can_transcode(source, codec):
                return f"{what} has {f.CODECS.get(source, source)} pages, which cannot be re-compressed here"
    return None


def _merge_key_values(
    metas: Sequence[Struct], paths: Sequence[str]
) -> tuple[dict[str, str], str | None, str | None]:
    """The merged footer key/values (``HoodieFileMetadataMerger``) and the min/max record keys."""
    merged: dict[str, str] = {}
    low: str | None = None
    high: str | None = None
    blooms: list[BloomFilter] = []
    created_by: list[str] = []
    for meta, path in zip(metas, paths, strict=True):
        kv = f.key_values(meta)
        merged.update(kv)
        lo, hi = kv.get(MIN_RECORD_KEY_FOOTER), kv.get(MAX_RECORD_KEY_FOOTER)
        if lo is not None and (low is None or _java_order(lo) < _java_order(low)):
            low = lo
        if hi is not None and (high is None or _java_order(hi) > _java_order(high)):
            high = hi
        text = kv.get(BLOOM_FILTER_FOOTER_KEY)
        if text:
            code = kv.get(BLOOM_TYPE_FOOTER_KEY) or "SIMPLE"
            try:
                blooms.append(deserialize_bloom_filter(text, code))
            except CorruptFileError as exc:
                raise CorruptFileError(f"{path}: {exc}") from exc
        writer = f.text(meta, f.FMD_CREATED_BY)
        if writer is not None and writer not in created_by:
            created_by.append(writer)
    if low is not None:
        merged[MIN_RECORD_KEY_FOOTER] = low
    if high is not None:
        merged[MAX_RECORD_KEY_FOOTER] = high
    if blooms:
        merged[BLOOM_FILTER_FOOTER_KEY] = union_bloom_filters(blooms).serialize()
    merged.pop(AVRO_SCHEMA_FOOTER, None)
    merged.pop(SPARK_ROW_METADATA, None)
    merged[ORIGINAL_CREATED_BY] = "\n".join(created_by)
    return merged, low, high


SE_FIELD_ID = 9


def schema_signature(meta: Struct) -> bytes:
    """A file's Parquet schema as binary copy compares it: every element, except the root's name
    and field ids, which say nothing about the stored values.

    Hudi's copier writes the first input's schema and copies each input's chunks under the column of
    the same path (``HoodieParquetBinaryCopyBase.processBlocksFromReader``): files whose signatures
    are equal are copied as Hudi copies them (files written by parquet-avro and by pyarrow name the
    root differently); any other difference (a column, a type, an annotation) is refused.
    """
    elements: list[Value] = []
    for k, element in enumerate(meta.get_list(f.FMD_SCHEMA)):
        if not isinstance(element, Struct):
            raise CorruptFileError("a Parquet schema element is not a struct")
        plain = Struct(dict(element.fields))
        plain.drop(SE_FIELD_ID, *((f.SE_NAME,) if k == 0 else ()))
        elements.append(plain)
    return encode_struct(Struct({f.FMD_SCHEMA: (LIST, TList(STRUCT, elements))}))


def plan_binary_copy(
    fileio: FileIO, paths: Sequence[str], codec: str, footers: Sequence[Struct] | None = None
) -> CopyPlan | str:
    """A plan to stitch ``paths`` into one file, or the reason they cannot be (nothing is written).

    ``footers`` are the files' footers when the caller has read them already.
    """
    if not paths:
        return "no input files"
    try:
        target = codec_id(codec)
    except InvalidInputError as exc:
        return str(exc)
    metas: list[Struct] = []
    type_codes: set[str | None] = set()
    first_schema: bytes | None = None
    for k, path in enumerate(paths):
        meta = footers[k] if footers is not None else read_file_footer(fileio, path)
        schema = schema_signature(meta)
        if first_schema is None:
            first_schema = schema
            reason = _schema_refusal(meta, path)
            if reason:
                return reason
        elif schema != first_schema:
            return f"{path} has a different Parquet schema from {paths[0]}"
        reason = _chunk_refusal(meta, target, path)
        if reason:
            return reason
        kv = f.key_values(meta)
        code = kv.get(BLOOM_TYPE_FOOTER_KEY)
        if code is None and kv.get(BLOOM_FILTER_FOOTER_KEY) is not None:
            code = "SIMPLE"
        type_codes.add(code)
        metas.append(meta)
    if len(type_codes) > 1:
        return f"the inputs' bloom filter type codes differ: {sorted(str(c) for c in type_codes)}"
    try:
        merged, low, high = _merge_key_values(metas, paths)
    except InvalidInputError as exc:
        return str(exc)
    rows = sum(m.get_int(f.FMD_NUM_ROWS) for m in metas)
    return CopyPlan(tuple(paths), target, merged, low, high, rows, tuple(metas))


def read_file_footer(fileio: FileIO, path: str) -> Struct:
    """The footer of ``path``, reading only the file's tail."""
    info = fileio.info(path)
    if info is None:
        raise CorruptFileError(f"{path} does not exist")
    tail = fileio.read_range(path, max(0, info.size - 64 * 1024), min(info.size, 64 * 1024))
    if len(tail) < 12:
        raise CorruptFileError(f"{path} is too short ({info.size} bytes) to be a Parquet file")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > info.size:
        raise CorruptFileError(f"{path}: footer length {length} does not fit the file of {info.size} bytes")
    if length + 8 > len(tail):
        tail = fileio.read_range(path, info.size - length - 8, length + 8)
    return f.read_footer(f.MAGIC + tail[len(tail) - length - 8 :], path)


class _FileNameChunks:
    """``_hoodie_file_name`` column chunks holding one value, encoded once per row count."""

    def __init__(self, value: str, codec: int, nullable: bool) -> None:
        self.value = value
        self.target = codec
        # pyarrow writes LZ4 only as LZ4_RAW: its pages are re-framed for Hadoop's LZ4 below
        self.codec = ARROW_CODECS[LZ4_RAW if codec == LZ4_HADOOP else codec] or "none"
        self.nullable = nullable
        self._cache: dict[int, tuple[bytes, Struct, int]] = {}

    def get(self, rows: int) -> tuple[bytes, Struct, int]:
        """The chunk's pages, its ``ColumnMetaData`` and where the pages started in their file."""
        found = self._cache.get(rows)
        if found is None:
            indices = pa.array(np.zeros(rows, dtype=np.int32))
            column = pa.DictionaryArray.from_arrays(indices, pa.array([self.value], pa.string()))
            schema = pa.schema([pa.field(FILENAME_METADATA_FIELD, column.type, self.nullable)])
            sink = io.BytesIO()
            pq.write_table(
                pa.Table.from_arrays([column], schema=schema),
                sink,
                compression=self.codec,
                row_group_size=max(rows, 1),
                store_schema=False,
                write_page_index=False,
            )
            data = sink.getvalue()
            meta = f.read_footer(data, "the encoded _hoodie_file_name")
            rg = meta.get_list(f.FMD_ROW_GROUPS)[0]
            assert isinstance(rg, Struct)
            chunk = rg.get_list(f.RG_COLUMNS)[0]
            assert isinstance(chunk, Struct)
            cm = chunk.get_struct(f.CC_META)
            assert cm is not None
            start, length = f.chunk_range(cm)
            pages = data[start : start + length]
            if self.target == LZ4_HADOOP:
                moved = transcode_chunk(pages, cm.get_int(f.CM_NUM_VALUES), LZ4_RAW, LZ4_HADOOP)
                pages = moved.data
                cm.set(f.CM_CODEC, I32, LZ4_HADOOP)
                cm.set(f.CM_COMPRESSED, I64, len(pages))
                cm.set(f.CM_UNCOMPRESSED, I64, moved.uncompressed_size)
                cm.set(f.CM_DATA_PAGE_OFFSET, I64, start + moved.data_offset)
                cm.drop(f.CM_DICTIONARY_PAGE_OFFSET)
                if moved.dictionary_offset is not None:
                    cm.set(f.CM_DICTIONARY_PAGE_OFFSET, I64, start + moved.dictionary_offset)
            found = (pages, cm, start)
            self._cache[rows] = found
        return found


def _read_row_group(fileio: FileIO, path: str, rg: Struct) -> tuple[int, memoryview]:
    """Where a row group's column chunks start in ``path``, and their bytes."""
    ranges = []
    for chunk in rg.get_list(f.RG_COLUMNS):
        assert isinstance(chunk, Struct)
        cm = chunk.get_struct(f.CC_META)
        if cm is None:
            raise CorruptFileError(f"{path}: a column chunk has no metadata")
        ranges.append(f.chunk_range(cm))
    if not ranges:
        return 0, memoryview(b"")
    start = min(s for s, _ in ranges)
    end = max(s + n for s, n in ranges)
    data = fileio.read_range(path, start, end - start)
    if len(data) != end - start:
        raise CorruptFileError(f"{path}: a row group's column chunks run past the end of the file")
    return start, memoryview(data)


def _shift(cm: Struct, delta: int) -> None:
    """Move a chunk's page offsets by ``delta``; drop what points at pages not carried over."""
    cm.set(f.CM_DATA_PAGE_OFFSET, I64, cm.get_int(f.CM_DATA_PAGE_OFFSET) + delta)
    dictionary = cm.get(f.CM_DICTIONARY_PAGE_OFFSET)
    if isinstance(dictionary, int) and 0 < dictionary < cm.get_int(f.CM_DATA_PAGE_OFFSET) - delta:
        cm.set(f.CM_DICTIONARY_PAGE_OFFSET, I64, dictionary + delta)
    else:
        cm.drop(f.CM_DICTIONARY_PAGE_OFFSET)
    cm.drop(f.CM_INDEX_PAGE_OFFSET, *f.CM_BLOOM_FILTER)


def recompress(source_io: FileIO, source: str, fileio: FileIO, output: str, codec: int) -> CopyResult:
    """``source`` written again at ``output`` with every page re-compressed to ``codec``.

    Its footer key/values are kept as they are; its values are not decoded. This is how a file
    pyarrow wrote in LZ4_RAW becomes the Hadoop-framed LZ4 file parquet-mr writes for ``lz4``.
    """
    meta = read_file_footer(source_io, source)
    kv = f.key_values(meta)
    low, high = kv.get(MIN_RECORD_KEY_FOOTER), kv.get(MAX_RECORD_KEY_FOOTER)
    plan = CopyPlan((source,), codec, kv, low, high, meta.get_int(f.FMD_NUM_ROWS), (meta,))
    return binary_copy(fileio, plan, output, source_io=source_io)


def binary_copy(
    fileio: FileIO, plan: CopyPlan, output: str, *, source_io: FileIO | None = None
) -> CopyResult:
    """Write ``output`` from the planned inputs' column chunks (see the module doc).

    The inputs are read through ``source_io`` when given, else through ``fileio``.
    """
    reader = source_io or fileio
    file_name = output.rstrip("/").rsplit("/", 1)[-1]
    first = plan._metas[0]
    columns = f.leaf_columns(first)
    name_column = next((i for i, c in enumerate(columns) if c.path == (FILENAME_METADATA_FIELD,)), None)
    names = (
        _FileNameChunks(file_name, plan.codec, columns[name_column].repetition == f.OPTIONAL)
        if name_column is not None
        else None
    )
    row_groups: list[Struct] = []
    pos = len(f.MAGIC)
    with fileio.open_output(output) as sink:
        sink.write(f.MAGIC)
        for path, meta in zip(plan.inputs, plan._metas, strict=True):
            if reader.read_range(path, 0, 4) != f.MAGIC:
                raise CorruptFileError(f"{path} is not a Parquet file (no leading {f.MAGIC!r})")
            for rg in meta.get_list(f.FMD_ROW_GROUPS):
                assert isinstance(rg, Struct)
                num_rows = rg.get_int(f.RG_NUM_ROWS)
                if num_rows == 0:
                    continue  # nothing to carry (parquet-mr never writes one; a reader needs none)
                # One read per row group (Hudi reads a row group's span at once too): memory stays
                # bounded by the largest row group, not the file.
                span_start, data = _read_row_group(reader, path, rg)
                out_rg = Struct(dict(rg.fields))
                out_chunks: list[Struct] = []
                start_of_group = pos
                total = 0
                for j, chunk in enumerate(rg.get_list(f.RG_COLUMNS)):
                    assert isinstance(chunk, Struct)
                    cm = chunk.get_struct(f.CC_META)
                    assert cm is not None
                    pages: bytes | memoryview
                    if names is not None and j == name_column:
                        pages, template, start = names.get(num_rows)
                        new_cm = Struct(dict(template.fields))
                        _shift(new_cm, pos - start)
                    else:
                        new_cm = Struct(dict(cm.fields))
                        start, length = f.chunk_range(cm)
                        pages = data[start - span_start : start - span_start + length]
                        if len(pages) != length:
                            raise CorruptFileError(f"{path}: a column chunk runs past the end of the file")
                        source = cm.get_int(f.CM_CODEC)
                        if source != plan.codec:
                            moved = transcode_chunk(pages, cm.get_int(f.CM_NUM_VALUES), source, plan.codec)
                            pages = moved.data
                            new_cm.set(f.CM_CODEC, I32, plan.codec)
                            new_cm.set(f.CM_COMPRESSED, I64, len(pages))
                            new_cm.set(f.CM_UNCOMPRESSED, I64, moved.uncompressed_size)
                            new_cm.set(f.CM_DATA_PAGE_OFFSET, I64, pos + moved.data_offset)
                            new_cm.drop(
                                f.CM_DICTIONARY_PAGE_OFFSET, f.CM_INDEX_PAGE_OFFSET, *f.CM_BLOOM_FILTER
                            )
                            if moved.dictionary_offset is not None:
                                new_cm.set(f.CM_DICTIONARY_PAGE_OFFSET, I64, pos + moved.dictionary_offset)
                        else:
                            _shift(new_cm, pos - start)
                    out_chunk = Struct(dict(chunk.fields))
                    out_chunk.drop(*f.CC_OFFSET_INDEX, *f.CC_COLUMN_INDEX)
                    out_chunk.set(f.CC_FILE_OFFSET, I64, pos)
                    out_chunk.set(f.CC_META, STRUCT, new_cm)
                    out_chunks.append(out_chunk)
                    total += new_cm.get_int(f.CM_UNCOMPRESSED)
                    sink.write(pages)
                    pos += len(pages)
                chunk_items: list[Value] = [*out_chunks]
                out_rg.set(f.RG_COLUMNS, LIST, TList(STRUCT, chunk_items))
                out_rg.set(f.RG_TOTAL_BYTE_SIZE, I64, total)
                out_rg.set(f.RG_FILE_OFFSET, I64, start_of_group)
                out_rg.set(f.RG_TOTAL_COMPRESSED, I64, pos - start_of_group)
                out_rg.set(f.RG_ORDINAL, 4, len(row_groups))
                row_groups.append(out_rg)
        out_meta = Struct(dict(first.fields))
        out_meta.set(f.FMD_NUM_ROWS, I64, plan.num_rows)
        group_items: list[Value] = [*row_groups]
        out_meta.set(f.FMD_ROW_GROUPS, LIST, TList(STRUCT, group_items))
        f.set_key_values(out_meta, plan.key_values)
        tail = f.footer_bytes(out_meta)
        sink.write(tail)
        pos += len(tail)
    return CopyResult(output, pos, plan.num_rows, plan.min_record_key, plan.max_record_key)
