"""Schema evolution without schema-on-read: which writer schema may follow a table's latest one.

Hudi (``HoodieSchemaCompatibility.checkValidEvolution`` / ``AvroSchemaCompatibility``, without
``hoodie.schema.on.read.enable``) lets a write evolve the table schema only so that every file
written before stays readable with the new one: fields are added as nullable (top level or in
nested records), and a field's type changes only by one of Hudi's promotions
(:func:`hoodie.schema.avro_arrow.conform`). Dropping or renaming a field needs schema-on-read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from hoodie.errors import InvalidInputError, SchemaError
from hoodie.schema.avro_arrow import avro_to_arrow_schema, promotion

__all__ = ["WRITE_SCHEMA_KEY", "check_evolution", "unreadable_by_name", "write_schema_option"]


def _check_fields(
    old: list[pa.Field], new: list[pa.Field], where: str, problems: list[str], *, drops_ok: bool = False
) -> None:
    by_name = {f.name: f for f in new}
    old_names = {f.name for f in old}
    for field in old:
        path = f"{where}{field.name}"
        if field.name not in by_name:
            if not drops_ok:
                problems.append(f"{path} is dropped (dropping a column needs schema-on-read)")
            continue
        _check_type(field.type, by_name[field.name].type, path, problems, drops_ok=drops_ok)
    for field in new:
        if field.name not in old_names and not field.nullable:
            problems.append(f"{where}{field.name} is added but not nullable")


def _check_type(
    old: pa.DataType, new: pa.DataType, path: str, problems: list[str], *, drops_ok: bool = False
) -> None:
    t = pa.types
    if old == new:
        return
    if t.is_struct(old) and t.is_struct(new):
        _check_fields(list(old), list(new), f"{path}.", problems, drops_ok=drops_ok)
    elif t.is_list(old) and t.is_list(new):
        _check_type(old.value_type, new.value_type, f"{path}[]", problems, drops_ok=drops_ok)
    elif t.is_map(old) and t.is_map(new):
        _check_type(old.item_type, new.item_type, f"{path}.value", problems, drops_ok=drops_ok)
    elif promotion(old, new) is None:
        problems.append(f"{path}: {old} -> {new} is not one of Hudi's type promotions")


def check_evolution(latest: Mapping[str, Any] | None, writer: Mapping[str, Any], where: str) -> None:
    """Raise :class:`SchemaError` naming each field if ``writer`` is not a valid evolution of the
    table's ``latest`` schema (both Avro record schemas without meta fields)."""
    if latest is None:
        return
    problems: list[str] = []
    _check_fields(list(avro_to_arrow_schema(latest)), list(avro_to_arrow_schema(writer)), "", problems)
    if problems:
        raise SchemaError(
            f"{where}: the writer schema does not evolve the table schema: {'; '.join(problems)}"
        )


def unreadable_by_name(older: Mapping[str, Any], latest: Mapping[str, Any]) -> list[str]:
    """What keeps files written with the Avro schema ``older`` from being read with ``latest``
    by name (columns ``latest`` dropped are simply not read)."""
    problems: list[str] = []
    old, new = avro_to_arrow_schema(older), avro_to_arrow_schema(latest)
    _check_fields(list(old), list(new), "", problems, drops_ok=True)
    return problems


WRITE_SCHEMA_KEY = "hoodie.write.schema"  # HoodieWriteConfig.WRITE_SCHEMA_OVERRIDE


def write_schema_option(props: Mapping[str, str]) -> dict[str, Any] | None:
    """The Avro writer schema given as ``hoodie.write.schema``, if any."""
    text = props.get(WRITE_SCHEMA_KEY)
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError as e:
        raise InvalidInputError(f"{WRITE_SCHEMA_KEY}={text[:200]!r} is not an Avro schema (JSON): {e}") from e
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise InvalidInputError(f"{WRITE_SCHEMA_KEY}={text[:200]!r} is not an Avro record schema")
    return parsed
