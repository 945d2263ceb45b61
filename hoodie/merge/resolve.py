"""Which merge configuration a table (and a write) merges with: Hudi 1.1's resolution of merge mode,
payload class and strategy id from ``hoodie.properties`` and the write's options.

The constants and the :class:`~hoodie.merge.config.MergeConfig` it builds live in
:mod:`hoodie.merge.config`; this module also checks, for CUSTOM tables, that the named merger or
payload is available here (:mod:`hoodie.merge.mergers`, :mod:`hoodie.merge.payloads`), which is why
it stands apart: the merge modules import the config, and only this one imports them back.
"""

from __future__ import annotations

from collections.abc import Mapping

from hoodie.config.table_config import RecordMergeMode, TableConfig, TableKeys, TableVersion
from hoodie.errors import InvalidTableConfigError
from hoodie.merge.config import (
    DEFAULT_PAYLOAD,
    DELETE_FIELD_KEY,
    DELETE_MARKER_KEY,
    MERGE_PROPERTY_PREFIX,
    OVERWRITE_WITH_LATEST_PAYLOAD,
    PAYLOAD_BASED_STRATEGY_ID,
    UNAVAILABLE_MARKER_KEYS,
    WRITE_PAYLOAD_CLASS_KEY,
    MergeConfig,
    PartialUpdateMode,
    canonical_payload_class,
    infer_pre_v9_merge_configs,
    strategy_id_for_mode,
    v9_merge_properties_for_payload,
)
from hoodie.merge.mergers import record_merger_for
from hoodie.merge.payloads import payload_for


def _table_payload_class(props: Mapping[str, str]) -> str | None:
    """The payload class a table names: ``hoodie.compaction.payload.class``, then the v9 legacy key,
    then the write key (``HoodieRecordPayload.getPayloadClassNameIfPresent``)."""
    for key in (TableKeys.PAYLOAD_CLASS.key, TableKeys.LEGACY_PAYLOAD_CLASS.key, WRITE_PAYLOAD_CLASS_KEY):
        value = canonical_payload_class(props.get(key))
        if value is not None:
            return value
    return None


def _effective_payload_class(props: Mapping[str, str], mode: RecordMergeMode | None) -> str:
    """``HoodieTableConfig.getPayloadClass``: the named payload, else one derived from the mode."""
    named = _table_payload_class(props)
    if named is not None:
        return named
    return OVERWRITE_WITH_LATEST_PAYLOAD if mode is RecordMergeMode.COMMIT_TIME_ORDERING else DEFAULT_PAYLOAD


def _strip_merge_properties(props: Mapping[str, str]) -> dict[str, str]:
    n = len(MERGE_PROPERTY_PREFIX)
    return {k[n:]: v for k, v in props.items() if k.startswith(MERGE_PROPERTY_PREFIX)}


def _nonempty(value: str | None) -> str | None:
    return value if value is not None and value != "" else None


def resolve_merge_config(config: TableConfig, write_props: Mapping[str, str] | None = None) -> MergeConfig:
    """The merge configuration Hudi 1.1 uses for ``config`` (and, on writes, ``write_props``).

    * v9: the persisted mode (inferred as for v8 if a hand-made table lacks it).
    * v6/v8: inferred from mode, payload class and strategy id (:func:`infer_pre_v9_merge_configs`).
      A missing payload class counts as ``DefaultHoodieRecordPayload`` (``OverwriteWithLatest`` when
      the mode is COMMIT_TIME), as in Hudi 1.x; 0.x's default was ``OverwriteWithLatest``.
    * With ``write_props`` naming a ``hoodie.datasource.write.payload.class`` that differs from the
      table's, the mode is inferred from that payload alone, as Hudi's ingestion path does.

    Ordering fields come from the table config (empty for COMMIT_TIME). Raises
    :class:`InvalidTableConfigError` for contradictory settings and :class:`UnsupportedTableError`
    for a CUSTOM table whose merger (strategy id) or payload class is not available here.
    """
    table_props: Mapping[str, str] = config.props
    wprops: Mapping[str, str] = write_props or {}
    version = config.table_version
    configured_mode = config.merge_mode
    table_strategy = _nonempty(config.merge_strategy_id)
    ordering = config.ordering_fields
    effective_payload = _effective_payload_class(table_props, configured_mode)
    writer_payload = canonical_payload_class(wprops.get(WRITE_PAYLOAD_CLASS_KEY))

    payload: str | None
    strategy: str | None
    if writer_payload is not None and writer_payload != effective_payload:
        if version >= TableVersion.NINE:
            reconciled = v9_merge_properties_for_payload(writer_payload)
            mode = RecordMergeMode(reconciled[TableKeys.MERGE_MODE.key])
            strategy = reconciled[TableKeys.MERGE_STRATEGY_ID.key]
            payload = writer_payload
        else:
            mode, payload, strategy = infer_pre_v9_merge_configs(
                None, writer_payload, None, ordering, version
            )
    elif version < TableVersion.NINE:
        mode, payload, strategy = infer_pre_v9_merge_configs(
            configured_mode, effective_payload, table_strategy, ordering, version
        )
    else:
        payload = _table_payload_class(table_props)
        if configured_mode is None:
            mode, payload, strategy = infer_pre_v9_merge_configs(
                None, payload, table_strategy, ordering, version
            )
        else:
            mode = configured_mode
            strategy = table_strategy or strategy_id_for_mode(mode, payload, None, version)
            if mode is RecordMergeMode.CUSTOM and strategy is None:
                raise InvalidTableConfigError(
                    f"{TableKeys.MERGE_MODE.key}=CUSTOM needs {TableKeys.MERGE_STRATEGY_ID.key} "
                    f"or {TableKeys.PAYLOAD_CLASS.key}"
                )

    partial_mode = (
        PartialUpdateMode.parse(config.partial_update_mode) if version >= TableVersion.NINE else None
    )
    merge_props = _strip_merge_properties(table_props)
    props: dict[str, str] = {**table_props, **wprops, **merge_props}
    delete_field = _nonempty(props.get(DELETE_FIELD_KEY))
    delete_marker = _nonempty(props.get(DELETE_MARKER_KEY))
    if delete_field is not None and delete_marker is None:
        raise InvalidTableConfigError(f"{DELETE_FIELD_KEY}={delete_field} is set without {DELETE_MARKER_KEY}")
    if delete_marker is not None and delete_field is None:
        raise InvalidTableConfigError(
            f"{DELETE_MARKER_KEY}={delete_marker} is set without {DELETE_FIELD_KEY}"
        )
    unavailable = next((props[k] for k in UNAVAILABLE_MARKER_KEYS if props.get(k) is not None), None)

    resolved = MergeConfig(
        mode=mode,
        ordering_fields=() if mode is RecordMergeMode.COMMIT_TIME_ORDERING else ordering,
        strategy_id=strategy,
        payload_class=payload,
        partial_update_mode=partial_mode,
        delete_field=delete_field,
        delete_marker=delete_marker,
        unavailable_marker=unavailable,
        props=props,
        table_version=version,
    )
    if mode is RecordMergeMode.CUSTOM:
        _check_custom_merger(resolved)
    return resolved


def _check_custom_merger(config: MergeConfig) -> None:
    """Fail fast when a CUSTOM table's merger or payload class is not available."""

    if config.strategy_id is None:
        raise InvalidTableConfigError("CUSTOM merge mode without a merge strategy id")
    if config.strategy_id == PAYLOAD_BASED_STRATEGY_ID:
        if config.payload_class is None:
            raise InvalidTableConfigError(f"strategy id {PAYLOAD_BASED_STRATEGY_ID} needs a payload class")
        payload_for(config.payload_class)
    else:
        record_merger_for(config.strategy_id)
