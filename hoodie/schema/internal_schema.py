"""Schema-on-read: Hudi's ``InternalSchema`` (columns with ids), its history, and reading a file
written under one version of it with another.

A table evolved with ``hoodie.schema.on.read.enable=true`` (Spark SQL ``ALTER TABLE ... RENAME /
DROP / ALTER COLUMN``) keeps every version of its schema: ``.hoodie/.schema/<instant>.schemacommit``
holds ``{"schemas": [...]}`` (``FileBasedInternalSchemaStorageManager``), and each write's commit
metadata has its version under ``latest_schema`` (``SerDeHelper.LATEST_SCHEMA``). A version is a
record (``SerDeHelper.toJson``): ``max_column_id``, ``version-id`` (the instant time that set it),
``type: record``, ``fields`` of ``{id, name, optional, type[, doc]}``; nested records, ``array``
(``element-id``, ``element``, ``element_optional``) and ``map`` (``key-id``, ``key``,
``value-id``, ``value``, ``value_optional``) carry ids too.

A file is read with the version in force when it was written: the one whose ``version-id`` is
the file's instant time, else the newest before it (``InternalSchemaCache.searchSchemaAndCache``
with ``FSUtils.getCommitTime(file)``; a log block's ``INSTANT_TIME`` header). Its columns are
matched to the query schema by id (``InternalSchemaMerger``): a renamed column is read under its
old name, a dropped one is not read, a column added later (a new id, even under an old column's
name) reads as null; types then change by Hudi's promotions (:func:`avro_arrow.conform`).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from hoodie.errors import SchemaError
from hoodie.io.fileio import FileIO
from hoodie.models.commit import CommitMetadata
from hoodie.schema.avro_arrow import conform, promotion

__all__ = [
    "LATEST_SCHEMA_KEY",
    "SCHEMA_COMMIT_SUFFIX",
    "InternalField",
    "InternalSchema",
    "SchemaHistory",
    "SchemaOnRead",
    "parse_internal_schema",
    "parse_schema_history",
    "read_as",
    "schema_commit_instant",
]

LATEST_SCHEMA_KEY = "latest_schema"
SCHEMA_COMMIT_SUFFIX = ".schemacommit"
SCHEMA_FOLDER = ".schema"


@dataclass(frozen=True, slots=True)
class InternalField:
    """A field with its id; ``children`` are a record's fields (by name), ``element`` /
    ``value`` the record fields under an array's element or a map's value."""

    id: int
    name: str
    children: Mapping[str, InternalField] | None = None  # record
    element: InternalField | None = None  # array element / map value, as a pseudo-field
    primitive: str | None = None  # the type text of a primitive (``long``, ``decimal(10, 2)``)


@dataclass(frozen=True, slots=True)
class InternalSchema:
    version_id: int | None
    max_column_id: int | None
    fields: Mapping[str, InternalField]
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> str:
        """``SerDeHelper.toJson``'s text (Jackson's compact form, keys in written order)."""
        return json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    def by_id(self) -> dict[int, InternalField]:
        return {f.id: f for f in self.fields.values()}


def _parse_type(node: Any, field_id: int, name: str, where: str) -> InternalField:
    if isinstance(node, str):
        return InternalField(field_id, name, primitive=node.lower())
    if not isinstance(node, Mapping):
        raise SchemaError(f"{where}: {name}: unreadable type {node!r}")
    kind = node.get("type")
    if kind == "record":
        return InternalField(field_id, name, children=_parse_fields(node.get("fields"), where))
    if kind == "array":
        element = _parse_type(node.get("element"), int(node["element-id"]), "element", where)
        return InternalField(field_id, name, element=element)
    if kind == "map":
        value = _parse_type(node.get("value"), int(node["value-id"]), "value", where)
        return InternalField(field_id, name, element=value)
    raise SchemaError(f"{where}: {name}: unknown type {kind!r}")


def _parse_fields(fields: Any, where: str) -> dict[str, InternalField]:
    if not isinstance(fields, list):
        raise SchemaError(f"{where}: a record without a fields list")
    out: dict[str, InternalField] = {}
    for f in fields:
        try:
            out[f["name"]] = _parse_type(f["type"], int(f["id"]), f["name"], where)
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(f"{where}: unreadable field {json.dumps(f)[:200]}: {e}") from e
    return out


def parse_internal_schema(node: Mapping[str, Any] | str, where: str) -> InternalSchema:
    """One version (``SerDeHelper.fromJson``), from JSON text or parsed JSON."""
    if isinstance(node, str):
        try:
            node = json.loads(node)
        except ValueError as e:
            raise SchemaError(f"{where}: internal schema is not JSON: {e}") from e
    if not isinstance(node, Mapping) or node.get("type") != "record":
        raise SchemaError(f"{where}: an internal schema is a record, got {str(node)[:200]!r}")
    version = node.get("version-id")
    max_id = node.get("max_column_id")
    return InternalSchema(
        None if version is None else int(version),
        None if max_id is None else int(max_id),
        _parse_fields(node.get("fields"), where),
        node,
    )


def parse_schema_history(text: str | bytes, where: str) -> dict[int, InternalSchema]:
    """Every version of ``{"schemas": [...]}`` (``SerDeHelper.parseSchemas``) by version id."""
    try:
        node = json.loads(text)
    except ValueError as e:
        raise SchemaError(f"{where}: schema history is not JSON: {e}") from e
    if not isinstance(node, Mapping) or not isinstance(node.get("schemas"), list):
        raise SchemaError(f"{where}: schema history has no 'schemas' list")
    out: dict[int, InternalSchema] = {}
    for entry in node["schemas"]:
        schema = parse_internal_schema(entry, where)
        if schema.version_id is None:
            raise SchemaError(f"{where}: a schema of the history has no version-id")
        out[schema.version_id] = schema
    return out


def schema_commit_instant(name: str) -> str | None:
    """The instant time of a completed ``schemacommit`` file of ``.hoodie/.schema``:
    ``<instant>.schemacommit`` (timeline layout 1) or ``<instant>_<completion>.schemacommit``
    (layout 2); None for its requested / inflight files and anything else."""
    if not name.endswith(SCHEMA_COMMIT_SUFFIX):
        return None
    return name.removesuffix(SCHEMA_COMMIT_SUFFIX).split("_", 1)[0]


class SchemaHistory:
    """Every version of a table's internal schema, searched by instant time."""

    def __init__(
        self, versions: Mapping[int, InternalSchema], source: str, text: bytes | None = None
    ) -> None:
        self.versions = dict(versions)
        self.source = source
        self.text = text  # the newest history file's bytes, None when only commits carry versions
        self._ids = sorted(self.versions)

    @classmethod
    def load(
        cls,
        fileio: FileIO,
        meta_path: str,
        completed: Iterable[str],
        latest_schemas: Callable[[], Mapping[str, str]],
    ) -> SchemaHistory | None:
        """The history of a table: the newest ``.hoodie/.schema/<instant>.schemacommit`` of a
        completed instant (``FileBasedInternalSchemaStorageManager.getHistorySchemaStr`` keeps
        only those), plus the ``latest_schema`` of each commit (instant -> JSON); None when the
        table has neither (it does not use schema-on-read)."""
        versions: dict[int, InternalSchema] = {}
        source = ""
        text: bytes | None = None
        folder = posixpath.join(meta_path, SCHEMA_FOLDER)
        done = set(completed)
        if fileio.exists(folder):
            names = [
                i.path.rsplit("/", 1)[-1]
                for i in fileio.list_dir(folder)
                if i.path.endswith(SCHEMA_COMMIT_SUFFIX)
            ]
            valid = sorted(n for n in names if schema_commit_instant(n) in done)
            if valid:
                source = posixpath.join(folder, valid[-1])
                text = fileio.read_bytes(source)
                versions.update(parse_schema_history(text, source))
        for instant, version in (latest_schemas() if not versions else {}).items():
            schema = parse_internal_schema(version, f"commit {instant} {LATEST_SCHEMA_KEY}")
            if schema.version_id is not None:
                versions.setdefault(schema.version_id, schema)
            source = source or f"commit {instant} {LATEST_SCHEMA_KEY}"
        if not versions:
            return None
        return cls(versions, source, text)

    def at(self, instant_time: str) -> InternalSchema:
        """The version in force at ``instant_time``: that instant's, else the newest before it
        (``InternalSchemaUtils.searchSchema``)."""
        try:
            wanted = int(instant_time)
        except ValueError as e:
            raise SchemaError(f"{self.source}: instant time {instant_time!r} is not a number") from e
        idx = int(np.searchsorted(self._ids, wanted, side="right")) - 1
        if idx < 0:
            raise SchemaError(
                f"{self.source}: no schema version at or before instant {instant_time} "
                f"(versions {self._ids[:5]}{'...' if len(self._ids) > 5 else ''})"
            )
        return self.versions[self._ids[idx]]

    def latest(self) -> InternalSchema:
        return self.versions[self._ids[-1]]


def file_columns(file_schema: InternalSchema, query: InternalSchema, names: Iterable[str]) -> list[str]:
    """The top-level columns to read from a file for the query columns ``names``."""
    by_id = file_schema.by_id()
    out = []
    for name in names:
        q = query.fields.get(name)
        if q is None:
            out.append(name)  # meta fields and others the versions do not list: by name
        elif q.id in by_id:
            out.append(by_id[q.id].name)
    return out


def _remap(
    arr: pa.Array, file_field: InternalField, query_field: InternalField, target: pa.DataType
) -> pa.Array:
    t = pa.types
    if query_field.children is not None and t.is_struct(target) and t.is_struct(arr.type):
        by_id = {f.id: f for f in (file_field.children or {}).values()}
        present = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children, fields = [], []
        for tf in target:
            q = query_field.children.get(tf.name)
            f = by_id.get(q.id) if q is not None else None
            if q is not None and f is not None and f.name in present:
                children.append(_remap(arr.field(present[f.name]), f, q, tf.type))
                fields.append(pa.field(tf.name, children[-1].type, nullable=True))
            # a field without a file column is left out here: conform fills it with nulls
        mask = pa.array(~np.asarray(arr.is_valid())) if arr.null_count else None
        if not children:
            return pa.array([{} if v else None for v in np.asarray(arr.is_valid()).tolist()], pa.struct([]))
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if query_field.element is not None and file_field.element is not None:
        if t.is_list(target) and (t.is_list(arr.type) or t.is_large_list(arr.type)):
            values = _remap(arr.values, file_field.element, query_field.element, target.value_type)
            mask = pa.array(~np.asarray(arr.is_valid())) if arr.null_count else None
            return pa.ListArray.from_arrays(arr.offsets.cast(pa.int32()), values, mask=mask)
        if t.is_map(target) and t.is_map(arr.type):
            items = _remap(arr.items, file_field.element, query_field.element, target.item_type)
            mask = pa.array(~np.asarray(arr.is_valid())) if arr.null_count else None
            item_type = pa.map_(arr.type.key_type, items.type)
            return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, type=item_type, mask=mask)
    return arr


def read_as(
    data: pa.Table, file_schema: InternalSchema, query: InternalSchema, schema: pa.Schema, where: str
) -> pa.Table:
    """``data`` (columns named as ``file_schema`` names them) as rows of ``schema`` (named as
    ``query``): matched by id, renamed, dropped columns left out, added ones null, types promoted."""
    by_id = file_schema.by_id()
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for tf in schema:
        q = query.fields.get(tf.name)
        f: InternalField | None = None
        name: str | None
        if q is None:
            name = tf.name if tf.name in data.column_names else None
        else:
            f = by_id.get(q.id)
            name = f.name if f is not None and f.name in data.column_names else None
        if name is None:
            if not tf.nullable:
                raise SchemaError(f"{where}: {tf.name}: not nullable, and the file has no such column")
            arrays.append(pa.nulls(data.num_rows, tf.type))
            continue
        column = data.column(name)
        chunks = []
        label = f"{where}: {tf.name}" if name == tf.name else f"{where}: {tf.name} (written as {name})"
        for chunk in column.chunks:
            remapped = _remap(chunk, f, q, tf.type) if f is not None and q is not None else chunk
            chunks.append(conform(remapped, tf.type, label))
        arrays.append(pa.chunked_array(chunks, tf.type))
    return pa.Table.from_arrays(arrays, schema=schema)


_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
}


def primitive_arrow_type(text: str) -> pa.DataType | None:
    """The Arrow type of an InternalSchema primitive (``Types``); None for ones without a
    promotion rule here (time, timestamp, uuid, fixed)."""
    if text.startswith("decimal(") and text.endswith(")"):
        precision, _, scale = text[8:-1].partition(",")
        return pa.decimal128(int(precision), int(scale))
    return _PRIMITIVES.get(text)


def _version_problems(old: InternalField, new: InternalField, path: str, out: list[str]) -> None:
    if old.primitive is not None and new.primitive is not None:
        if old.primitive == new.primitive:
            return
        source, target = primitive_arrow_type(old.primitive), primitive_arrow_type(new.primitive)
        if source is None or target is None or promotion(source, target) is None:
            out.append(f"{path}: {old.primitive} -> {new.primitive}")
        return
    if new.children is not None and old.children is not None:
        by_id = {f.id: f for f in old.children.values()}
        for child in new.children.values():
            if child.id in by_id:
                _version_problems(by_id[child.id], child, f"{path}.{child.name}", out)
        return
    if new.element is not None and old.element is not None:
        _version_problems(old.element, new.element, f"{path}[]", out)
        return
    out.append(f"{path}: a {'record' if old.children is not None else 'value'} becomes another kind")


@dataclass(frozen=True, slots=True)
class SchemaOnRead:
    """How to read each file of a schema-on-read table: its own version, matched to ``query``."""

    history: SchemaHistory
    query: InternalSchema

    def columns(self, instant_time: str, names: Iterable[str]) -> list[str]:
        return file_columns(self.history.at(instant_time), self.query, names)

    def read(self, data: pa.Table, instant_time: str, schema: pa.Schema, where: str) -> pa.Table:
        return read_as(data, self.history.at(instant_time), self.query, schema, where)

    def query_names(self, instant_time: str, written: Iterable[str]) -> frozenset[str]:
        """The query names of the top-level columns a file of ``instant_time`` wrote as ``written``
        (a partial update's columns)."""
        version = self.history.at(instant_time)
        by_id = version.by_id()
        names = set(written)
        # columns neither version lists (meta fields of schemas without them) keep their name
        out = {n for n in names if n not in version.fields and n not in self.query.fields}
        for q in self.query.fields.values():
            f = by_id.get(q.id)
            if f is not None and f.name in names:
                out.add(q.name)
        return frozenset(out)

    def unreadable(self) -> list[str]:
        """Type changes between a version of the history and the query version that hts cannot
        read (outside Hudi's promotions it implements), as ``<version>: <column>: a -> b``."""
        out: list[str] = []
        for version_id, version in sorted(self.history.versions.items()):
            by_id = version.by_id()
            found: list[str] = []
            for q in self.query.fields.values():
                if q.id in by_id:
                    _version_problems(by_id[q.id], q, q.name, found)
            out.extend(f"version {version_id}: {p}" for p in found)
        return out

    def check_writable(self, base_path: str) -> None:
        """A write records the version in force and re-persists the history (below); without a
        history file Hudi's writer would mint a new version from the Avro schema instead, which
        hts does not do: refused before anything is written."""
        if self.history.text is None:
            raise SchemaError(
                f"{base_path}: schema-on-read table without a "
                f".hoodie/{SCHEMA_FOLDER}/*{SCHEMA_COMMIT_SUFFIX} history (versions only in "
                f"commit {LATEST_SCHEMA_KEY}, {self.history.source}): hts does not write to it"
            )

    def record_write(
        self,
        fileio: FileIO,
        meta_path: str,
        layout: int,
        instant_time: str,
        completion_time: str,
        metadata: CommitMetadata,
        current: SchemaOnRead | None,
    ) -> CommitMetadata:
        """What Hudi's writer with ``hoodie.schema.on.read.enable`` adds to a write that keeps the
        schema (``BaseHoodieWriteClient.saveInternalSchema``): the version in force as
        ``latest_schema``, and the unchanged history persisted before completion as a
        ``schemacommit`` instant of ``.hoodie/.schema`` (``persistHistorySchemaStr``: requested,
        inflight, then the completed file holding the history). ``current`` is the table's
        schema-on-read state read again now: if an ALTER TABLE completed since the write began,
        the write is refused (its history would lose that version)."""
        self.check_writable(meta_path)
        assert self.history.text is not None
        if current is None or current.history.text != self.history.text:
            raise SchemaError(
                f"{meta_path}: the schema history changed while writing {instant_time} "
                "(a concurrent ALTER TABLE); the write is aborted"
            )
        folder = posixpath.join(meta_path, SCHEMA_FOLDER)
        stem = f"{instant_time}{SCHEMA_COMMIT_SUFFIX}"
        fileio.write_bytes(posixpath.join(folder, f"{stem}.requested"), b"")
        fileio.write_bytes(posixpath.join(folder, f"{stem}.inflight"), b"")
        done = f"{instant_time}_{completion_time}{SCHEMA_COMMIT_SUFFIX}" if layout >= 2 else stem
        fileio.write_bytes(posixpath.join(folder, done), self.history.text)
        extra = {
            **(metadata.extra_metadata or {}),
            LATEST_SCHEMA_KEY: self.history.at(instant_time).to_json(),
        }
        return replace(metadata, extra_metadata=extra)
