"""CDC settings and the Avro schemas of CDC log blocks, one per supplemental logging mode.

Facts from Apache Hudi (``HoodieCDCUtils``, ``HoodieCDCSupplementalLoggingMode``,
``HoodieCDCOperation``, ``HoodieTableConfig.cdcSupplementalLoggingMode``):

- ``OP_KEY_ONLY`` blocks use the fixed schema ``CDC_SCHEMA_OP_AND_RECORDKEY_STRING`` (record
  ``Record``; ``op`` and ``record_key`` as ``["string","null"]``).
- ``DATA_BEFORE`` / ``DATA_BEFORE_AFTER`` blocks use ``createCDCSchema``: record ``CDC`` in the
  table schema's namespace, every field ``["null", T]`` with doc ``""`` and default null; fields
  ``op, record_key, before`` resp. ``op, ts_ms, before, after``; the images are the table schema
  without Hudi's meta fields.
- The mode is read with ``valueOf(value.toUpperCase())``; 0.13's ``cdc_op_key``,
  ``cdc_data_before`` and ``cdc_data_before_after`` are accepted as the same modes. Default
  ``DATA_BEFORE_AFTER``.
- ``op`` is ``i``, ``u`` or ``d``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from hoodie.config.table_config import TableConfig, TableKeys
from hoodie.errors import InvalidTableConfigError
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS_WITH_OPERATION

MODE_KEY = TableKeys.CDC_LOGGING_MODE.key
LOGFILE_SUFFIX = ".cdc"
"""``HoodieCDCUtils.CDC_LOGFILE_SUFFIX``. ``-cdc`` was used only before Hudi 0.13.0 was released
(table version 5); every table version hts handles (6, 8, 9) writes ``.cdc``."""

OP = "op"
TS_MS = "ts_ms"
BEFORE = "before"
AFTER = "after"
RECORD_KEY = "record_key"


class SupplementalLoggingMode(StrEnum):
    OP_KEY_ONLY = "OP_KEY_ONLY"
    DATA_BEFORE = "DATA_BEFORE"
    DATA_BEFORE_AFTER = "DATA_BEFORE_AFTER"

    @classmethod
    def parse(cls, value: str | None) -> SupplementalLoggingMode:
        """Hudi's lenient reading of ``hoodie.table.cdc.supplemental.logging.mode``."""
        if value is None or not value.strip():
            return cls.DATA_BEFORE_AFTER
        text = value.strip().upper()
        text = _LEGACY.get(text, text)
        try:
            return cls(text)
        except ValueError:
            raise InvalidTableConfigError(
                f"{MODE_KEY}={value} is not a CDC supplemental logging mode "
                f"(expected one of {', '.join(m.value for m in cls)})"
            ) from None


_LEGACY = {
    "CDC_OP_KEY": "OP_KEY_ONLY",
    "CDC_DATA_BEFORE": "DATA_BEFORE",
    "CDC_DATA_BEFORE_AFTER": "DATA_BEFORE_AFTER",
}


class CDCOperation(StrEnum):
    INSERT = "i"
    UPDATE = "u"
    DELETE = "d"


def cdc_enabled(config: TableConfig) -> bool:
    return (config.get(TableKeys.CDC_ENABLED) or "").strip().lower() == "true"


def logging_mode(config: TableConfig) -> SupplementalLoggingMode:
    return SupplementalLoggingMode.parse(config.props.get(MODE_KEY))


OP_KEY_SCHEMA_TEXT = (
    '{"type":"record","name":"Record","fields":['
    '{"name":"op","type":["string","null"]},'
    '{"name":"record_key","type":["string","null"]}]}'
)


def data_schema(table_schema: Mapping[str, Any]) -> dict[str, Any]:
    """``table_schema`` without Hudi's meta fields (the schema of a before/after image), as
    ``HoodieAvroUtils.removeMetadataFields`` drops them."""
    out = dict(table_schema)
    out["fields"] = [
        f for f in table_schema["fields"] if f.get("name") not in HOODIE_META_COLUMNS_WITH_OPERATION
    ]
    return out


def _nullable(name: str, typ: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", typ], "doc": "", "default": None}


def cdc_schema(mode: SupplementalLoggingMode, table_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The Avro schema of CDC blocks in ``mode`` for a table of ``table_schema`` (meta fields or not)."""
    if mode is SupplementalLoggingMode.OP_KEY_ONLY:
        parsed: dict[str, Any] = json.loads(OP_KEY_SCHEMA_TEXT)
        return parsed
    image = data_schema(table_schema)
    if mode is SupplementalLoggingMode.DATA_BEFORE_AFTER:
        fields = [_nullable(OP, "string"), _nullable(TS_MS, "string"), _nullable(BEFORE, image)]
        # The after image repeats the named record type: Avro refers to it by its full name.
        fields.append(_nullable(AFTER, _full_name(image)))
    else:
        fields = [_nullable(OP, "string"), _nullable(RECORD_KEY, "string"), _nullable(BEFORE, image)]
    out: dict[str, Any] = {"type": "record", "name": "CDC"}
    if image.get("namespace"):
        out["namespace"] = image["namespace"]
    out["doc"] = ""
    out["fields"] = fields
    return out


def _full_name(record: Mapping[str, Any]) -> str:
    name = str(record["name"])
    ns = record.get("namespace")
    return name if "." in name or not ns else f"{ns}.{name}"


def schema_text(schema: Mapping[str, Any]) -> str:
    """The SCHEMA header text (Java's compact ``Schema.toString()``)."""
    if schema.get("name") == "Record":
        return OP_KEY_SCHEMA_TEXT
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
