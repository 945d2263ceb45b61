"""The benchmark table: one MERGE_ON_READ file group, a base file and one Avro log block of updates.

The table is written with our own writer (``create_table`` + ``HoodieWriter``) so it is a real
Hudi table: a ``bulk_insert`` of every row into a single base file, then an ``upsert`` of a
fraction of the keys with larger ordering values, which lands as one Avro data block in a log
file of that file group. Next to the table the generator writes ``updates.parquet``: the same
updated records (meta columns included) decoded from the log block with fastavro, which the
pyarrow "floor" reader merges with the base file.

Generated data is cached under ``var/bench/<key>/`` where the key holds :data:`DATA_VERSION`
and the generation parameters; a ``done.json`` marker is written last.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.config.table_config import RecordMergeMode, TableType, TableVersion
from hoodie.file_group.log_block import BlockType
from hoodie.file_group.log_reader import iter_blocks
from hoodie.read.reader import table_schema
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter

#: Bump when the generated data or its layout changes; old caches are then ignored.
DATA_VERSION = "v1"
#: The parquet codec of the generated base file (snappy: fast to write, the usual Spark default).
BASE_COMPRESSION = "snappy"
SEED = 20_240_611
KEY = "key"
ORDERING = "ts"
TABLE_NAME = "bench_mor"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = REPO / "var" / "bench"

#: The ten data columns: a string key, a long ordering field, then mixed types.
DATA_SCHEMA = pa.schema(
    [
        pa.field(KEY, pa.string(), nullable=False),
        pa.field(ORDERING, pa.int64(), nullable=False),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float64()),
        pa.field("score", pa.float64()),
        pa.field("category", pa.string()),
        pa.field("note", pa.string()),
        pa.field("active", pa.bool_()),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(12, 2)),
    ]
)
_CATEGORIES = np.array(
    ["books", "games", "garden", "grocery", "health", "home", "music", "outdoors", "sports", "toys"]
)
_EPOCH_US = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)


@dataclass(frozen=True)
class BenchData:
    """A generated benchmark table and what the readers need to know about it."""

    root: Path  # the cache directory
    table_path: Path
    base_file: Path
    log_file: Path
    updates_parquet: Path
    rows: int
    updates: int
    compression: str
    base_file_bytes: int
    log_file_bytes: int
    generate_seconds: float

    def describe(self) -> dict[str, Any]:
        """JSON-able fields; paths relative to ``root`` so a moved cache stays valid."""
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, Path):
                out[k] = "." if v == self.root else str(v.relative_to(self.root))
        return out


def cache_key(rows: int, updates: int) -> str:
    return f"{DATA_VERSION}-mor-{rows}r-{updates}u-{BASE_COMPRESSION}"


def _keys(ids: np.ndarray) -> pa.Array:
    """``key-000000012`` style keys (fixed width, so string order is id order)."""
    digits = pc.utf8_lpad(pc.cast(pa.array(ids, pa.int64()), pa.string()), 9, "0")
    return pc.binary_join_element_wise(pa.scalar("key-"), digits, "")


def make_rows(ids: np.ndarray, ts: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """Rows of :data:`DATA_SCHEMA` for the record ids ``ids`` with ordering values ``ts``."""
    n = len(ids)
    null_qty = rng.random(n) < 0.05
    note_len = rng.integers(8, 40, n)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz ", np.uint8)
    body = alphabet[rng.integers(0, len(alphabet), int(note_len.sum()))]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(note_len, out=offsets[1:])
    note = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(body.tobytes())])
    cents = rng.integers(-10_000_000, 100_000_000, n)
    words = np.empty((n, 2), np.int64)  # decimal128 little-endian: low word, sign-extended high word
    words[:, 0] = cents
    words[:, 1] = cents >> 63
    amount = pa.Array.from_buffers(pa.decimal128(12, 2), n, [None, pa.py_buffer(words)])
    arrays: list[pa.Array] = [
        _keys(ids),
        pa.array(ts, pa.int64()),
        pa.array(rng.integers(0, 1000, n).astype(np.int32), pa.int32(), mask=null_qty),
        pa.array(np.round(rng.random(n) * 1000, 2)),
        pa.array(rng.standard_normal(n)),
        pa.array(_CATEGORIES[rng.integers(0, len(_CATEGORIES), n)], pa.string()),
        note,
        pa.array(rng.random(n) < 0.5),
        pa.array(_EPOCH_US + rng.integers(0, 365 * 86_400_000_000, n), pa.timestamp("us", tz="UTC")),
        amount,
    ]
    return pa.Table.from_arrays(arrays, schema=DATA_SCHEMA)


def make_inputs(rows: int, updates: int, seed: int = SEED) -> tuple[pa.Table, pa.Table]:
    """The bulk-insert batch (ids ``0..rows-1``) and the upsert batch (``updates`` of those ids).

    Updates carry an ordering value larger than the original's, so they win the merge.
    """
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    ts = 1_000_000 + rng.integers(0, 1_000_000, rows)
    base = make_rows(ids, ts, rng)
    picked = np.sort(rng.choice(rows, size=updates, replace=False))
    upd = make_rows(picked, ts[picked] + 1 + rng.integers(0, 1_000_000, updates), rng)
    return base, upd


def expected_merge(base: pa.Table, upd: pa.Table) -> pa.Table:
    """The merged data columns the readers must return (updates win), sorted by key."""
    keep = pc.invert(pc.is_in(base[KEY], value_set=upd[KEY]))
    merged = pa.concat_tables([base.filter(keep), upd])
    return merged.sort_by(KEY)


def _write_options(rows: int) -> WriteOptions:
    # One base file: a max file size far above rows * record-size estimate keeps bulk_insert
    # from splitting; inserts never spill into a second group.
    return WriteOptions(
        log_block_format=LogBlockFormat.AVRO,
        parquet_compression=BASE_COMPRESSION,
        max_file_size=max(rows, 1) * 4096 * 4,
        small_file_limit=0,
    )


def _single_file_group(table_path: Path) -> tuple[Path, Path]:
    table = HoodieTable.open(str(table_path))
    view = table.file_system_view(None, table.reload())
    slices = view.latest_file_slices(None)
    if len(slices) != 1:
        raise RuntimeError(f"expected one file group, found {len(slices)}")
    s = slices[0]
    base = s.base_file_path(table.base_path)
    logs = list(s.log_file_paths(table.base_path))
    if base is None or len(logs) != 1:
        raise RuntimeError(f"expected a base file and one log file, got {base} and {logs}")
    return Path(base), Path(logs[0])


def log_block_to_parquet(log_file: Path, arrow_schema: pa.Schema, out: Path) -> int:
    """Decode the single Avro data block of ``log_file`` with fastavro and write it as Parquet."""
    blocks = [b for b in iter_blocks(log_file.read_bytes(), str(log_file)) if not b.is_corrupt]
    if len(blocks) != 1 or blocks[0].block_type is not BlockType.AVRO_DATA:
        raise RuntimeError(f"{log_file}: expected one AVRO_DATA block, got {[b.block_type for b in blocks]}")
    block = blocks[0]
    assert block.schema is not None
    schema = fastavro.parse_schema(json.loads(block.schema))
    content = block.content
    version, count = struct.unpack_from(">ii", content, 0)
    if version != 3:
        raise RuntimeError(f"{log_file}: Avro block content version {version}")
    pos = 8
    records: list[dict[str, Any]] = []
    buf = io.BytesIO(content)
    for _ in range(count):
        (length,) = struct.unpack_from(">i", content, pos)
        buf.seek(pos + 4)
        records.append(fastavro.schemaless_reader(buf, schema, None))  # type: ignore[arg-type]
        pos += 4 + length
    table = pa.Table.from_pylist(records, schema=arrow_schema)
    pq.write_table(table, out, compression=BASE_COMPRESSION)
    return int(count)


def generate(root: Path, rows: int, updates: int, *, log: Any = print) -> BenchData:
    """Write the benchmark table under ``root`` (which must not exist yet)."""
    start = time.perf_counter()
    root.mkdir(parents=True)
    table_path = root / "table"
    log(f"generating {rows:,} rows + {updates:,} updates into {root} ...")
    base_rows, upd_rows = make_inputs(rows, updates)
    table = create_table(
        str(table_path),
        table_name=TABLE_NAME,
        table_type=TableType.MERGE_ON_READ,
        schema=DATA_SCHEMA,
        record_key_fields=[KEY],
        ordering_fields=[ORDERING],
        merge_mode=RecordMergeMode.EVENT_TIME_ORDERING,
        table_version=TableVersion.EIGHT,
    )
    options = _write_options(rows)
    writer = HoodieWriter(table, options=options)
    t0 = time.perf_counter()
    res = writer.bulk_insert(base_rows)
    log(
        f"  bulk_insert: {len(res.write_stats)} base file(s) in {time.perf_counter() - t0:.1f}s "
        f"(parquet {options.parquet_compression}, max_file_size {options.max_file_size:,})"
    )
    if len(res.write_stats) != 1:
        raise RuntimeError(f"bulk_insert wrote {len(res.write_stats)} files, expected one file group")
    t0 = time.perf_counter()
    res = writer.upsert(upd_rows)
    log(
        f"  upsert: {res.num_updates:,} updates in {time.perf_counter() - t0:.1f}s "
        f"(log block format {options.log_block_format.value})"
    )
    if res.num_updates != updates or res.num_inserts:
        raise RuntimeError(f"upsert wrote {res.num_updates} updates and {res.num_inserts} inserts")
    base_file, log_file = _single_file_group(table_path)
    # The updates file gets the base file's exact Arrow schema so the floor can concatenate.
    schema = pq.read_schema(base_file).remove_metadata()
    if schema.names != table_schema(HoodieTable.open(str(table_path))).names:
        raise RuntimeError(f"{base_file}: unexpected columns {schema.names}")
    t0 = time.perf_counter()
    updates_parquet = root / "updates.parquet"
    n = log_block_to_parquet(log_file, schema, updates_parquet)
    if n != updates:
        raise RuntimeError(f"the log block holds {n} records, expected {updates}")
    log(f"  updates.parquet (fastavro decode of the log block): {time.perf_counter() - t0:.1f}s")
    data = BenchData(
        root=root,
        table_path=table_path,
        base_file=base_file,
        log_file=log_file,
        updates_parquet=updates_parquet,
        rows=rows,
        updates=updates,
        compression=BASE_COMPRESSION,
        base_file_bytes=base_file.stat().st_size,
        log_file_bytes=log_file.stat().st_size,
        generate_seconds=round(time.perf_counter() - start, 1),
    )
    (root / "done.json").write_text(json.dumps(data.describe(), indent=2))
    return data


def load(root: Path) -> BenchData | None:
    """The cached data under ``root``, or None if it is missing or incomplete."""
    marker = root / "done.json"
    if not marker.is_file():
        return None
    raw = json.loads(marker.read_text())
    paths = {"root", "table_path", "base_file", "log_file", "updates_parquet"}
    try:
        data = BenchData(**{k: root / v if k in paths else v for k, v in raw.items()})
    except TypeError:  # a marker from an older layout
        return None
    data = replace(data, root=root)
    if not all(p.exists() for p in (data.base_file, data.log_file, data.updates_parquet)):
        return None
    return data


def ensure(
    rows: int, updates: int, *, cache_dir: Path = DEFAULT_CACHE, regenerate: bool = False, log: Any = print
) -> BenchData:
    """The cached benchmark data for these parameters, generating it when needed."""
    root = cache_dir / cache_key(rows, updates)
    if not regenerate:
        data = load(root)
        if data is not None:
            log(f"using cached table {root} (generated in {data.generate_seconds}s; --regenerate to rebuild)")
            return data
    if root.exists():
        shutil.rmtree(root)
    return generate(root, rows, updates, log=log)
