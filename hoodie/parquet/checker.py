"""Whether Apache Hudi's binary copy takes a set of Parquet files, decided as Hudi decides it.

Hudi's ``ParquetBinaryCopyChecker`` (``hudi-client-common``, package ``org.apache.hudi.parquet.io``)
reads every input file's footer and accepts the set only when all three hold:

1. no file's schema is one it cannot copy (``schemaNotSupportBinaryCopy``): a ``DECIMAL`` column
   stored as INT32, INT64 or INT96, or a ``LIST`` group whose first child is named ``array``
   (the two-level layout), anywhere in the schema;
2. at most one Hudi bloom filter type code across the files (``hoodie_bloom_filter_type_code``; a
   file with a bloom filter but no code counts as ``SIMPLE``; a file with neither counts as null);
3. every key of its repetition map has one repetition across the files (``collectRepetitions``).

The repetition map's keys are Hudi's own, quirks included: a field is ``parent + "." + name``; a
``LIST`` group adds ``parent + ".list"`` and ``parent + ".list.element"`` (without the list's own
name, so two lists under one parent share them) and recurses into a group element under
``parent + ".list.element" + elementName`` (no dot); a ``MAP`` adds ``parent + ".key_value"``,
``".key_value.key"`` and ``".key_value.value"`` likewise; any other group recurses under
``parent + "." + name``. Within one file a later entry replaces an earlier one (a Java
``HashMap``); across files the repetitions of a key are collected into a set.

A schema Hudi's walk cannot take (a ``LIST`` whose middle level is a primitive, a ``MAP`` whose
``key_value`` has fewer than two fields) makes Hudi's clustering fail with an exception; here it
is :class:`UnsupportedSchema`, which the caller turns into a refusal before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hoodie.bloom import BLOOM_FILTER_FOOTER_KEY, BLOOM_TYPE_FOOTER_KEY
from hoodie.errors import CorruptFileError
from hoodie.parquet import footer as f
from hoodie.parquet.thrift import Struct

REPETITIONS = {f.REQUIRED: "REQUIRED", f.OPTIONAL: "OPTIONAL", f.REPEATED: "REPEATED"}
CONVERTED_MAP = 1
LOGICAL_MAP, LOGICAL_LIST = 2, 3  # LogicalType union member ids


class UnsupportedSchema(Exception):
    """A schema Hudi's checker fails on (an exception in Hudi, a refusal here)."""


@dataclass(slots=True)
class _Node:
    name: str
    repetition: str
    element: Struct
    children: list[_Node] = field(default_factory=list)

    @property
    def is_primitive(self) -> bool:
        return not self.element.get_int(f.SE_NUM_CHILDREN, 0)

    def _annotated(self, converted: int, logical: int) -> bool:
        found = self.element.get_struct(f.SE_LOGICAL_TYPE)
        return self.element.get(f.SE_CONVERTED_TYPE) == converted or (
            found is not None and logical in found.fields
        )

    @property
    def is_list(self) -> bool:
        return self._annotated(f.CONVERTED_LIST, LOGICAL_LIST)

    @property
    def is_map(self) -> bool:
        return self._annotated(CONVERTED_MAP, LOGICAL_MAP)

    @property
    def is_decimal(self) -> bool:
        return self._annotated(f.CONVERTED_DECIMAL, f.LOGICAL_DECIMAL)


def _tree(meta: Struct, what: str) -> _Node:
    elements = [e for e in meta.get_list(f.FMD_SCHEMA) if isinstance(e, Struct)]
    if not elements:
        raise CorruptFileError(f"{what} has no Parquet schema")
    pos = 0

    def node() -> _Node:
        nonlocal pos
        if pos >= len(elements):
            raise CorruptFileError(f"{what}: the Parquet schema lists fewer elements than its children say")
        element = elements[pos]
        pos += 1
        out = _Node(
            f.text(element, f.SE_NAME) or "",
            REPETITIONS.get(element.get_int(f.SE_REPETITION, f.REQUIRED), "REQUIRED"),
            element,
        )
        out.children = [node() for _ in range(element.get_int(f.SE_NUM_CHILDREN, 0))]
        return out

    return node()


def schema_refusal(fields: Iterable[_Node], what: str) -> str | None:
    """Hudi's ``schemaNotSupportBinaryCopy``: why these fields cannot be copied, if they cannot."""
    for node in fields:
        if node.is_decimal and node.element.get(f.SE_TYPE) in (f.INT32, f.INT64, f.INT96):
            return f"{what}: decimal column {node.name!r} is stored as an integer"
        if not node.is_primitive:
            if node.is_list and node.children[0].name == "array":
                return f"{what}: list column {node.name!r} has the two-level 'array' layout"
            reason = schema_refusal(node.children, what)
            if reason is not None:
                return reason
    return None


def _repetitions(parent: str, group: _Node, what: str) -> dict[str, str]:
    """Hudi's ``collectRepetitions(parentName, GroupType)`` (see the module doc)."""
    out: dict[str, str] = {}
    for node in group.children:
        out[parent + "." + node.name] = node.repetition
        if node.is_primitive:
            continue
        if node.is_list:
            middle = node.children[0]
            if middle.is_primitive:
                raise UnsupportedSchema(f"{what}: list column {node.name!r} has no group level under it")
            element = middle.children[0]
            out[parent + ".list"] = middle.repetition
            out[parent + ".list.element"] = element.repetition
            if not element.is_primitive:
                out.update(_repetitions(parent + ".list.element" + element.name, element, what))
        elif node.is_map:
            key_value = node.children[0]
            if key_value.is_primitive or len(key_value.children) < 2:
                raise UnsupportedSchema(f"{what}: map column {node.name!r} has no key and value under it")
            key, value = key_value.children[0], key_value.children[1]
            out[parent + ".key_value"] = key_value.repetition
            out[parent + ".key_value.key"] = key.repetition
            out[parent + ".key_value.value"] = value.repetition
            if not key.is_primitive:
                out.update(_repetitions(parent + ".key_value.key" + key.name, key, what))
            if not value.is_primitive:
                out.update(_repetitions(parent + ".key_value.value" + value.name, value, what))
        else:
            out.update(_repetitions(parent + "." + node.name, node, what))
    return out


@dataclass(frozen=True, slots=True)
class FileInfo:
    """Hudi's ``ParquetFileInfo``: what the checker keeps of one file's footer."""

    path: str
    refusal: str | None
    bloom_type_code: str | None
    root: _Node | None


def file_info(meta: Struct, path: str) -> FileInfo:
    """Hudi's ``collectFileInfo`` of one file's footer."""
    root = _tree(meta, path)
    reason = schema_refusal(root.children, path)
    if reason is not None:
        return FileInfo(path, reason, None, None)
    kv = f.key_values(meta)
    code = kv.get(BLOOM_TYPE_FOOTER_KEY)
    if code is None and kv.get(BLOOM_FILTER_FOOTER_KEY) is not None:
        code = "SIMPLE"
    return FileInfo(path, None, code, root)


def verify_files(files: Sequence[FileInfo]) -> str | None:
    """Hudi's ``verifyFiles``: None when binary copy takes every file, else why it does not."""
    for info in files:
        if info.refusal is not None:
            return info.refusal
    codes = {info.bloom_type_code for info in files}
    if len(codes) > 1:
        return f"the inputs' bloom filter type codes differ: {sorted(str(c) for c in codes)}"
    seen: dict[str, dict[str, str]] = {}
    for info in files:
        assert info.root is not None
        for key, repetition in _repetitions("", info.root, info.path).items():
            seen.setdefault(key, {}).setdefault(repetition, info.path)
    for key, found in seen.items():
        if len(found) > 1:
            shown = ", ".join(f"{rep} in {path}" for rep, path in sorted(found.items()))
            return f"field {key!r} has more than one repetition across the inputs: {shown}"
    return None
