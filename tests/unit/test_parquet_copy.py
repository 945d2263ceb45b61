"""The Parquet footer codec and binary copy: footers Apache Hudi (parquet-mr) and pyarrow wrote
re-encode byte for byte; stitched files read back as their inputs' rows, with Hudi's footer keys."""

from __future__ import annotations

import decimal
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hoodie.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_TYPE_FOOTER_KEY,
    BloomFilterTypeCode,
    create_bloom_filter,
    deserialize_bloom_filter,
    union_bloom_filters,
)
from hoodie.errors import CorruptFileError, InvalidInputError
from hoodie.file_group.base_file_writer import BloomOptions, footer_metadata
from hoodie.io.fileio import LocalFileIO
from hoodie.parquet import footer as f
from hoodie.parquet.checker import file_info, verify_files
from hoodie.parquet.copy import CopyPlan, binary_copy, plan_binary_copy
from hoodie.parquet.pages import DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE
from hoodie.parquet.thrift import (
    BOOL_TRUE,
    I32,
    I64,
    LIST,
    STRUCT,
    Struct,
    TList,
    decode_struct,
    encode_struct,
)
from tests.conftest import fixture_names, fixture_path

AVRO = {"type": "record", "name": "r", "fields": []}
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]


def _check(*paths: Path) -> str | None:
    """Hudi's ParquetBinaryCopyChecker over ``paths``."""
    return verify_files([file_info(f.read_footer(p.read_bytes(), str(p)), str(p)) for p in paths])


def _footer_span(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length : -8]


def test_thrift_round_trips_every_kind_of_field() -> None:
    inner = Struct()
    inner.set(1, BOOL_TRUE, False)
    inner.set(40, I64, -(2**62))
    s = Struct()
    s.set(1, I32, -7)
    s.set(2, LIST, TList(I64, list(range(-20, 20))))
    s.set(3, STRUCT, inner)
    s.set(200, LIST, TList(BOOL_TRUE, [True, False, True]))
    encoded = encode_struct(s)
    decoded, end = decode_struct(encoded)
    assert end == len(encoded)
    assert encode_struct(decoded) == encoded
    assert decoded.get_int(1) == -7 and decoded.get_list(2) == list(range(-20, 20))
    assert decoded.get_struct(3) is not None and decoded.get_struct(3).get_int(40) == -(2**62)  # type: ignore[union-attr]
    assert decoded.get_list(200) == [True, False, True]


def test_footers_apache_hudi_wrote_re_encode_byte_for_byte(fixture_root: Path) -> None:
    seen = 0
    for name in fixture_names():
        for path in sorted(fixture_path(fixture_root, name).rglob("*.parquet"))[:3]:
            data = path.read_bytes()
            meta = f.read_footer(data, str(path))
            assert encode_struct(meta) == _footer_span(data), path
            rows = pq.ParquetFile(path).metadata.num_rows
            assert meta.get_int(f.FMD_NUM_ROWS) == rows
            seen += 1
    assert seen > 10


def test_a_torn_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "torn.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    path.write_bytes(path.read_bytes()[:-30] + path.read_bytes()[-8:])
    with pytest.raises(CorruptFileError, match="torn.parquet"):
        plan_binary_copy(LocalFileIO(), [str(path)], "snappy")


def test_footers_pyarrow_wrote_with_page_indexes_re_encode(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array(range(1000)), "b": pa.array([str(i % 7) for i in range(1000)])})
    path = tmp_path / "x.parquet"
    pq.write_table(table, path, row_group_size=300, write_page_index=True, write_page_checksum=True)
    data = path.read_bytes()
    assert encode_struct(f.read_footer(data, "x")) == _footer_span(data)


def _keys(k: int, n: int) -> list[str]:
    return [f"key-{k}-{i:05d}" for i in range(n)]


def _input(k: int, n: int, rnd: random.Random) -> pa.Table:
    keys = _keys(k, n)
    rnd.shuffle(keys)
    return pa.table(
        {
            "_hoodie_commit_time": pa.array([f"2024010100000{k}"] * n),
            "_hoodie_commit_seqno": pa.array([f"2024010100000{k}_0_{i}" for i in range(n)]),
            "_hoodie_record_key": pa.array(keys),
            "_hoodie_partition_path": pa.array(["p"] * n),
            "_hoodie_file_name": pa.array([f"input-{k}.parquet"] * n),
            "id": pa.array(np.arange(n, dtype=np.int64) + 10_000 * k),
            "cat": pa.array([rnd.choice(["red", "green", None]) for _ in range(n)]),
            "score": pa.array([None if i % 5 == 0 else rnd.uniform(-1, 1) for i in range(n)]),
            "nested": pa.array(
                [
                    None
                    if i % 4 == 0
                    else {"a": i, "tags": [str(j) for j in range(i % 3)], "m": {"x": i % 2}}
                    for i in range(n)
                ],
                pa.struct(
                    [
                        ("a", pa.int32()),
                        ("tags", pa.list_(pa.string())),
                        ("m", pa.map_(pa.string(), pa.int64())),
                    ]
                ),
            ),
        }
    )


def _write_inputs(
    tmp_path: Path,
    codec: str,
    page_version: str,
    bloom: BloomFilterTypeCode = BloomFilterTypeCode.DYNAMIC_V0,
    sizes: tuple[int, ...] = (700, 333, 1201),
    checksum: bool = False,
) -> tuple[list[str], pa.Table]:
    rnd = random.Random(7)
    paths, tables = [], []
    for k, n in enumerate(sizes):
        table = _input(k, n, rnd)
        meta = footer_metadata(
            table["_hoodie_record_key"], AVRO, BloomOptions(num_entries=400, type_code=bloom)
        )
        path = tmp_path / f"input-{k}.parquet"
        with pq.ParquetWriter(
            path,
            table.schema,
            compression=codec,
            use_dictionary=["cat", "_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"],
            data_page_version=page_version,
            data_page_size=2048,
            store_schema=False,
            write_page_checksum=checksum,
        ) as writer:
            writer.write_table(table, row_group_size=256)
            writer.add_key_value_metadata(meta)
        paths.append(str(path))
        tables.append(table)
    return paths, pa.concat_tables(tables)


@pytest.mark.parametrize(
    ("source", "target", "page_version"),
    [
        ("snappy", "snappy", "1.0"),
        ("zstd", "zstd", "2.0"),
        ("none", "uncompressed", "1.0"),
        ("gzip", "zstd", "1.0"),
        ("snappy", "uncompressed", "2.0"),
        ("none", "gzip", "2.0"),
    ],
)
def test_binary_copy_reads_back_as_its_inputs(
    tmp_path: Path, source: str, target: str, page_version: str
) -> None:
    fileio = LocalFileIO()
    paths, expected = _write_inputs(tmp_path, source, page_version, checksum=source == target)
    plan = plan_binary_copy(fileio, paths, target)
    assert isinstance(plan, CopyPlan), plan
    out = str(tmp_path / "out.parquet")
    result = binary_copy(fileio, plan, out)
    assert result.num_rows == expected.num_rows
    assert result.size == Path(out).stat().st_size

    name_at = expected.schema.get_field_index("_hoodie_file_name")
    expected = expected.set_column(
        name_at, expected.schema.field(name_at), pa.array(["out.parquet"] * expected.num_rows)
    )
    got = pq.read_table(out, page_checksum_verification=source == target)
    assert got.equals(expected)
    assert pq.read_table(out, use_threads=False, columns=["nested"]).equals(expected.select(["nested"]))

    md = pq.ParquetFile(out).metadata
    inputs = [pq.ParquetFile(p).metadata for p in paths]
    assert md.num_row_groups == sum(m.num_row_groups for m in inputs)
    copied_codec = {"none": "UNCOMPRESSED"}.get(target, target.upper())
    for i in range(md.num_row_groups):
        for j in range(md.num_columns):
            column = md.row_group(i).column(j)
            assert column.compression == copied_codec
            encodings = set(column.encodings)
            name = column.path_in_schema
            if name in ("cat", "_hoodie_file_name"):
                assert "RLE_DICTIONARY" in encodings or "PLAIN_DICTIONARY" in encodings
            elif name == "id":
                assert not encodings & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}
    # Every offset in the new footer points at a page header of the right kind.
    data = Path(out).read_bytes()
    for i in range(md.num_row_groups):
        for j in range(md.num_columns):
            column = md.row_group(i).column(j)
            header, _ = decode_struct(data, column.data_page_offset)
            assert header.get_int(1) in (DATA_PAGE, DATA_PAGE_V2)
            if column.has_dictionary_page:
                header, _ = decode_struct(data, column.dictionary_page_offset)
                assert header.get_int(1) == DICTIONARY_PAGE
    # The copied chunks hold the same pages: same statistics, byte sizes unchanged where not re-compressed.
    first = inputs[0].row_group(0)
    for j in range(md.num_columns):
        if first.column(j).path_in_schema != "_hoodie_file_name":
            assert md.row_group(0).column(j).statistics == first.column(j).statistics
            if source == target:
                assert (
                    md.row_group(0).column(j).total_compressed_size == first.column(j).total_compressed_size
                )

    keys = expected["_hoodie_record_key"]
    kv = {k.decode(): v.decode() for k, v in (md.metadata or {}).items()}
    assert kv["hoodie_min_record_key"] == pc.min(keys).as_py()
    assert kv["hoodie_max_record_key"] == pc.max(keys).as_py()
    assert kv[BLOOM_TYPE_FOOTER_KEY] == "DYNAMIC_V0"
    bloom = deserialize_bloom_filter(kv[BLOOM_FILTER_FOOTER_KEY], kv[BLOOM_TYPE_FOOTER_KEY])
    assert bloom.might_contain_many(keys).all()
    assert "parquet.avro.schema" not in kv
    assert kv["original.created.by"] == inputs[0].created_by
    assert kv["writer.model.name"] == "avro"


def test_simple_bloom_filters_merge(tmp_path: Path) -> None:
    fileio = LocalFileIO()
    paths, expected = _write_inputs(tmp_path, "snappy", "1.0", bloom=BloomFilterTypeCode.SIMPLE)
    plan = plan_binary_copy(fileio, paths, "snappy")
    assert isinstance(plan, CopyPlan)
    assert BLOOM_TYPE_FOOTER_KEY not in plan.key_values
    bloom = deserialize_bloom_filter(plan.key_values[BLOOM_FILTER_FOOTER_KEY], "SIMPLE")
    assert bloom.might_contain_many(expected["_hoodie_record_key"]).all()


def test_inputs_that_do_not_qualify_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    fileio = LocalFileIO()
    paths, _ = _write_inputs(tmp_path, "snappy", "1.0", sizes=(100, 100))
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"_hoodie_record_key": ["a"], "x": [1]}), other)
    assert "different Parquet schema" in str(plan_binary_copy(fileio, [*paths, str(other)], "snappy"))

    (tmp_path / "s").mkdir()
    mixed, _ = _write_inputs(tmp_path / "s", "snappy", "1.0", bloom=BloomFilterTypeCode.SIMPLE, sizes=(50,))
    assert "bloom filter type codes differ" in str(plan_binary_copy(fileio, [paths[0], *mixed], "snappy"))

    decimals = tmp_path / "dec.parquet"
    table = pa.table({"d": pa.array([decimal.Decimal("1.25")], pa.decimal128(5, 2))})
    pq.write_table(table, decimals, store_decimal_as_integer=True)
    assert "stored as an integer" in str(_check(decimals))
    assert "hts cannot write lzo pages" in str(plan_binary_copy(fileio, paths, "lzo"))
    assert "none is not a parquet-mr CompressionCodecName" in str(plan_binary_copy(fileio, paths, "none"))
    assert not (tmp_path / "out.parquet").exists()


def test_dynamic_filters_of_different_growth_union_to_one_holding_every_key() -> None:
    small = create_bloom_filter(100, 0.001, "DYNAMIC_V0", 1000)
    big = create_bloom_filter(100, 0.001, "DYNAMIC_V0", 1000)
    small_keys, big_keys = [f"s{i}" for i in range(30)], [f"b{i}" for i in range(450)]
    small.add_all(small_keys)
    big.add_all(big_keys)
    merged = union_bloom_filters(
        [
            deserialize_bloom_filter(small.serialize(), "DYNAMIC_V0"),
            deserialize_bloom_filter(big.serialize(), "DYNAMIC_V0"),
        ]
    )
    assert merged.might_contain_many(small_keys + big_keys).all()
    again = deserialize_bloom_filter(merged.serialize(), "DYNAMIC_V0")
    assert again.might_contain_many(small_keys + big_keys).all()
    with pytest.raises(InvalidInputError, match="cannot be or-ed"):
        union_bloom_filters([small, create_bloom_filter(100, 0.001, "SIMPLE")])


def _by_schema(base: Path) -> list[list[str]]:
    """The table's base files grouped by identical Parquet schema."""
    groups: dict[bytes, list[str]] = {}
    for p in sorted(base.rglob("*.parquet")):
        if ".hoodie" not in p.parts:
            meta = f.read_footer(p.read_bytes(), str(p))
            groups.setdefault(encode_struct(Struct({f.FMD_SCHEMA: meta.fields[f.FMD_SCHEMA]})), []).append(
                str(p)
            )
    return list(groups.values())


@pytest.mark.parametrize(
    "name", ["sample_table/mor/avro/v9_txns_simple_meta", "sample_table/cow/v9_txns_simple_nometa"]
)
@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_files_apache_hudi_wrote_copy_to_their_rows(
    fixture_root: Path, tmp_path: Path, name: str, codec: str
) -> None:
    fileio = LocalFileIO()
    groups = [g for g in _by_schema(fixture_path(fixture_root, name)) if len(g) > 1]
    assert groups
    for k, paths in enumerate(groups):
        plan = plan_binary_copy(fileio, paths, codec)
        assert isinstance(plan, CopyPlan), plan
        out = tmp_path / f"out-{k}.parquet"
        binary_copy(fileio, plan, str(out))
        got = pq.read_table(out)
        expected = pa.concat_tables([pq.read_table(p) for p in paths])
        if "_hoodie_file_name" in expected.column_names:
            assert set(got["_hoodie_file_name"].to_pylist()) == {out.name}
            got, expected = (
                got.drop_columns(["_hoodie_file_name"]),
                expected.drop_columns(["_hoodie_file_name"]),
            )
            kv = {k.decode(): v.decode() for k, v in (pq.ParquetFile(out).metadata.metadata or {}).items()}
            keys = pq.read_table(out, columns=["_hoodie_record_key"]).column(0)
            bloom = deserialize_bloom_filter(
                kv[BLOOM_FILTER_FOOTER_KEY], kv.get(BLOOM_TYPE_FOOTER_KEY, "SIMPLE")
            )
            assert bloom.might_contain_many(keys).all()
            assert kv["hoodie_min_record_key"] == pc.min(keys).as_py()
            assert kv["hoodie_max_record_key"] == pc.max(keys).as_py()
            assert kv["original.created.by"].startswith("parquet-mr")
        assert got.equals(expected)


def test_two_level_lists_apache_hudi_wrote_are_refused_as_hudi_refuses_them(fixture_root: Path) -> None:
    paths = [
        p for g in _by_schema(fixture_path(fixture_root, "sample_table/cow/v8_nonpartitioned")) for p in g
    ]
    assert "two-level 'array' layout" in str(_check(Path(paths[0])))


def _renamed_root(path: Path, name: bytes) -> None:
    """Rewrite ``path``'s footer with the schema root named ``name`` and a field id on each column."""
    data = path.read_bytes()
    meta = f.read_footer(data, str(path))
    elements = meta.get_list(f.FMD_SCHEMA)
    for k, element in enumerate(elements):
        assert isinstance(element, Struct)
        if k == 0:
            element.set(f.SE_NAME, 8, name)  # BINARY
        else:
            element.set(9, I32, k)  # field_id
    length = int.from_bytes(data[-8:-4], "little")
    path.write_bytes(data[: len(data) - 8 - length] + f.footer_bytes(meta))


def test_files_whose_schemas_differ_only_in_root_name_and_field_ids_copy_under_the_first_schema(
    tmp_path: Path,
) -> None:
    fileio = LocalFileIO()
    paths, expected = _write_inputs(tmp_path, "snappy", "1.0", sizes=(120, 80))
    _renamed_root(Path(paths[1]), b"hoodie.t.t_record")  # as parquet-avro names the root
    plan = plan_binary_copy(fileio, paths, "snappy")
    assert isinstance(plan, CopyPlan), plan
    out = tmp_path / "out.parquet"
    binary_copy(fileio, plan, str(out))
    got = pq.read_table(out).drop_columns(["_hoodie_file_name"])
    assert got.equals(expected.drop_columns(["_hoodie_file_name"]))
    first = f.read_footer(Path(paths[0]).read_bytes(), paths[0])
    written = f.read_footer(out.read_bytes(), str(out))
    assert encode_struct(Struct({f.FMD_SCHEMA: written.fields[f.FMD_SCHEMA]})) == encode_struct(
        Struct({f.FMD_SCHEMA: first.fields[f.FMD_SCHEMA]})
    )  # the first input's schema, as Hudi's copier writes it

    # An annotation that changes what the values mean is a different schema: refused.
    plain = tmp_path / "plain.parquet"
    stamped = tmp_path / "stamped.parquet"
    pq.write_table(pa.table({"t": pa.array([1, 2], pa.int64())}), plain)
    pq.write_table(pa.table({"t": pa.array([1, 2], pa.timestamp("ms"))}), stamped)
    assert "different Parquet schema" in str(plan_binary_copy(fileio, [str(plain), str(stamped)], "snappy"))
