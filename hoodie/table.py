"""A Hudi table: its config, timeline, plan and commit payloads, and file-system views.

``HoodieTable.open(uri)`` validates the table and fails fast, naming anything unsupported. The
object caches what never changes (completed commit metadata, plans) and reloads the timeline on
request; everything else is derived from an immutable snapshot of the timeline.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hoodie.config.table_config import METAFOLDER, TableConfig, TableKeys, read_table_properties
from hoodie.errors import MalformedPlanError, SchemaError, TableNotFoundError, TimelineError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.file_group.view import FileSystemView, ListingSource
from hoodie.io.fileio import FileInfo, FileIO, join
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexPlan
from hoodie.timeline.history import CompletionTimeLookup
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import timezone_of
from hoodie.timeline.layout import TablePaths
from hoodie.timeline.timeline import ActiveTimeline

if TYPE_CHECKING:
    from hoodie.shape.table_shape import TableShape

log = logging.getLogger(__name__)


def is_metadata_table_path(base_path: str) -> bool:
    """True when ``base_path`` is the metadata table of another table."""
    return base_path.rstrip("/").endswith(f"/{METAFOLDER}/metadata")


class HoodieTable:
    """An opened Hudi table."""

    def __init__(self, fileio: FileIO, base_path: str, config: TableConfig) -> None:
        self.fileio = fileio
        self.base_path = base_path
        self.config = config
        self.paths = TablePaths.of(base_path, config)
        self.tz = timezone_of(config.timezone.value)
        self._timeline: ActiveTimeline | None = None
        self._commit_cache: dict[tuple[str, str | None], CommitMetadata] = {}
        self._plan_cache: dict[tuple[str, str], Any] = {}
        self._guard = threading.Lock()
        self._archived_completion: CompletionTimeLookup | None = None
        self._index_definitions: dict[str, Any] | None = None
        self._shapes: dict[
            tuple[tuple[str, str], ...], tuple[ActiveTimeline | None, tuple[Any, ...] | None, TableShape]
        ] = {}
        """Declared options -> (timeline, its signature, the shape computed on it); None, None once
        the properties were re-read (the shape is then computed again, from the old one)."""

    # -- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, uri: str, **storage_options: Any) -> HoodieTable:
        """Open the table at ``uri`` (a path or URI); raises naming the first unsupported value."""
        fileio, base_path = FileIO.for_uri(uri, **storage_options)
        meta = join(base_path, METAFOLDER)
        try:
            props = read_table_properties(fileio, meta)
        except FileNotFoundError as e:
            raise TableNotFoundError(
                f"no Hudi table at {uri}: {join(meta, 'hoodie.properties')} does not exist"
            ) from e
        config = TableConfig.from_properties(
            props, source=join(meta, "hoodie.properties"), metadata_table=is_metadata_table_path(base_path)
        )
        return cls(fileio, base_path, config)

    def reload_config(self) -> TableConfig:
        """Re-read ``hoodie.properties`` (another process may have changed it, e.g. an indexer)."""
        meta = join(self.base_path, METAFOLDER)
        props = read_table_properties(self.fileio, meta)
        self.config = TableConfig.from_properties(
            props, source=join(meta, "hoodie.properties"), metadata_table=self.is_metadata_table
        )
        self._index_definitions = None  # an index created or dropped changes both
        # Shapes are computed again on next use, starting from the old ones: a file-group verdict
        # that still holds is kept (no listing), everything read from the properties is read anew.
        self._shapes = {k: (None, None, shape) for k, (_, _, shape) in self._shapes.items()}
        return self.config

    def shape(
        self, options: Mapping[str, str] | None = None, view: FileSystemView | None = None
    ) -> TableShape:
        """The table's shape (:mod:`hoodie.shape`) from storage and the declared ``options``.

        Cached while the timeline and ``hoodie.properties`` are unchanged: every artefact a shape
        is recognised by changes with a commit (or a properties update, see :meth:`reload_config`).
        ``view`` (of the current timeline) lends its listings when the file groups must be listed.
        """
        from hoodie.shape.table_shape import DECLARED_KEYS, detect

        key = tuple(sorted((k, v) for k, v in (options or {}).items() if k in DECLARED_KEYS))
        timeline = self.timeline
        cached = self._shapes.get(key)
        if cached is not None and cached[0] is timeline:  # the very timeline it was computed on
            return cached[2]
        signature = tuple((i.requested_time, i.action.value, i.state.value) for i in timeline)
        if cached is not None and cached[1] == signature:
            shape = cached[2]
        else:
            shape = detect(self, options or {}, cached[2] if cached is not None else None, view)
        with self._guard:
            self._shapes[key] = (timeline, signature, shape)
        return shape

    def adopt_shapes(self, other: HoodieTable) -> None:
        """Start from ``other``'s computed shapes (the same table opened earlier): a shape still
        valid is not computed again, and a changed one is recomputed from it (see :meth:`shape`)."""
        if other is not self and other.base_path == self.base_path:
            with self._guard:
                self._shapes.update(other._shapes)

    @property
    def is_metadata_table(self) -> bool:
        """True for a data table's metadata table (``<base>/.hoodie/metadata``)."""
        return is_metadata_table_path(self.base_path)

    @property
    def table_version(self) -> int:
        return int(self.config.table_version)

    @property
    def name(self) -> str:
        return self.config.table_name

    def uri(self) -> str:
        return self.fileio.to_uri(self.base_path)

    # -- timeline -----------------------------------------------------------------------------
    @property
    def timeline(self) -> ActiveTimeline:
        if self._timeline is None:
            self._timeline = ActiveTimeline.load(self.fileio, self.paths, self.tz)
        return self._timeline

    def reload(self, listing: list[FileInfo] | None = None) -> ActiveTimeline:
        """The active timeline read again (from ``listing``, the timeline folder's, when given)."""
        self._timeline = ActiveTimeline.load(self.fileio, self.paths, self.tz, listing)
        self._archived_completion = None
        return self._timeline

    def archived_completion_time(self, requested_time: str) -> str | None:
        """Completion time of an instant that was archived to the LSM history (layout 2)."""
        if self.paths.layout < 2:
            return None
        if self._archived_completion is None:
            self._archived_completion = CompletionTimeLookup(self.fileio, self.paths)
        return self._archived_completion(requested_time)

    def _state_bytes(self, timeline: ActiveTimeline, ts: str, state: State) -> tuple[bytes, str]:
        name = timeline.state_file(ts, state)
        if name is None:
            raise TimelineError(f"instant {ts} has no {state.name.lower()} file on {self.paths.timeline}")
        path = timeline.path_of(name)
        return self.fileio.read_bytes(path), path

    def commit_metadata(self, instant: Instant, timeline: ActiveTimeline | None = None) -> CommitMetadata:
        """The metadata of a completed commit, delta commit or replace commit (cached)."""
        if not instant.is_completed:
            raise TimelineError(f"{instant} is not completed; it has no commit metadata")
        key = (instant.requested_time, instant.completion_time)
        cached = self._commit_cache.get(key)
        if cached is not None:
            return cached
        data, path = self._state_bytes(timeline or self.timeline, instant.requested_time, State.COMPLETED)
        model: type[CommitMetadata] = (
            ReplaceCommitMetadata if instant.action is Action.REPLACE_COMMIT else CommitMetadata
        )
        meta = model.from_bytes(data, self.table_version, path) if data else model()
        with self._guard:
            self._commit_cache[key] = meta
        return meta

    def compaction_plan(self, ts: str, timeline: ActiveTimeline | None = None) -> CompactionPlan:
        """The plan in ``T.compaction.requested`` (or ``T.logcompaction.requested``)."""
        plan: CompactionPlan = self._plan(ts, "compaction", CompactionPlan, timeline)
        return plan

    def clustering_plan(self, ts: str, timeline: ActiveTimeline | None = None) -> RequestedReplaceMetadata:
        """The requested replace metadata of a clustering (or replace) instant."""
        meta: RequestedReplaceMetadata = self._plan(ts, "clustering", RequestedReplaceMetadata, timeline)
        return meta

    def index_plan(self, ts: str, timeline: ActiveTimeline | None = None) -> IndexPlan:
        """The ``HoodieIndexPlan`` in ``T.indexing.requested``."""
        plan: IndexPlan = self._plan(ts, "indexing", IndexPlan, timeline)
        return plan

    def _plan(self, ts: str, kind: str, model: Any, timeline: ActiveTimeline | None) -> Any:
        key = (ts, kind)
        cached = self._plan_cache.get(key)
        if cached is not None:
            return cached
        data, path = self._state_bytes(timeline or self.timeline, ts, State.REQUESTED)
        if not data:
            raise MalformedPlanError(f"{path}: the requested file is empty; a {kind} plan was expected")
        plan = model.from_bytes(data, self.table_version, path)
        with self._guard:
            self._plan_cache[key] = plan
        return plan

    def is_clustering(self, instant: Instant, timeline: ActiveTimeline | None = None) -> bool:
        """Whether a pending instant is a clustering.

        Table version 8+ uses the ``clustering`` action; version 6 a ``replacecommit`` whose plan
        has operation type CLUSTER.
        """
        if instant.action is Action.CLUSTERING:
            return True
        if instant.action is not Action.REPLACE_COMMIT or instant.is_completed:
            return False
        tl = timeline or self.timeline
        data, path = self._state_bytes(tl, instant.requested_time, State.REQUESTED)
        if not data:
            return False
        meta = RequestedReplaceMetadata.from_bytes(data, self.table_version, path)
        return bool(meta.is_clustering)

    # -- derived state ------------------------------------------------------------------------
    def pending_compaction_operations(self, timeline: ActiveTimeline | None = None) -> dict[FileGroupId, str]:
        """File groups of pending compaction plans, mapped to the plan instant."""
        tl = timeline or self.timeline
        out: dict[FileGroupId, str] = {}
        for instant in tl.pending_compaction():
            plan = self.compaction_plan(instant.requested_time, tl)
            for partition, file_id in plan.file_groups():
                out[FileGroupId(partition, file_id)] = instant.requested_time
        return out

    def pending_clustering_file_groups(
        self, timeline: ActiveTimeline | None = None
    ) -> dict[FileGroupId, str]:
        """File groups that pending clustering plans will rewrite, mapped to the plan instant."""
        tl = timeline or self.timeline
        out: dict[FileGroupId, str] = {}
        for instant in tl.pending():
            if not self.is_clustering(instant, tl):
                continue
            meta = self.clustering_plan(instant.requested_time, tl)
            if meta.clustering_plan is None:
                continue
            for partition, file_id in meta.clustering_plan.file_groups():
                out[FileGroupId(partition, file_id)] = instant.requested_time
        return out

    def replaced_file_groups(self, timeline: ActiveTimeline | None = None) -> dict[FileGroupId, str]:
        """File groups named by completed replace commits, mapped to the (earliest) replace instant."""
        tl = timeline or self.timeline
        out: dict[FileGroupId, str] = {}
        for instant in tl.completed().actions(Action.REPLACE_COMMIT):
            meta = self.commit_metadata(instant, tl)
            if not isinstance(meta, ReplaceCommitMetadata):
                continue
            for partition, file_id in meta.replaced_file_ids():
                out.setdefault(FileGroupId(partition, file_id), instant.requested_time)
        return out

    def file_system_view(
        self,
        as_of: str | None = None,
        timeline: ActiveTimeline | None = None,
        source: ListingSource | None = None,
    ) -> FileSystemView:
        """File groups and slices as of ``as_of`` (a requested instant time, inclusive) or latest;
        ``source`` lists partitions instead of storage (the metadata table's ``files`` partition)."""
        tl = timeline or self.timeline
        return FileSystemView(
            self.fileio,
            self.base_path,
            self.paths.layout,
            tl,
            pending_compactions=self.pending_compaction_operations(tl),
            replaced=self.replaced_file_groups(tl),
            as_of=as_of,
            archived_completion_time=self.archived_completion_time,
            source=source,
        )

    # -- schema -------------------------------------------------------------------------------
    def latest_schema_json(self, as_of: str | None = None) -> dict[str, Any] | None:
        """The table's Avro schema without meta fields: from the latest commit that carries one,
        else ``hoodie.table.create.schema``; None for a table that has neither."""
        tl = self.timeline.completed().writes()
        if as_of is not None:
            tl = tl.before(as_of, inclusive=True)
        for instant in reversed(tl.instants):
            meta = self.commit_metadata(instant)
            if meta.schema:
                parsed: dict[str, Any] = json.loads(meta.schema)
                return parsed
        create = self.config.create_schema
        if create:
            created: dict[str, Any] = json.loads(create)
            return created
        return None

    def index_definitions(self) -> dict[str, Any]:
        """Index name -> definition from ``hoodie.table.index.defs.path`` (``indexDefinitions``
        of ``.hoodie/.index_defs/index.json``); empty when the table has none. Read once until
        :meth:`reload_config`."""
        if self._index_definitions is None:
            self._index_definitions = self._read_index_definitions()
        return self._index_definitions

    def _read_index_definitions(self) -> dict[str, Any]:
        rel = self.config.get(TableKeys.INDEX_DEFS_PATH)
        if not rel:
            return {}
        path = rel if rel.startswith("/") or "://" in rel else join(self.base_path, rel)
        if not self.fileio.exists(path):
            return {}
        try:
            defs: dict[str, Any] = json.loads(self.fileio.read_bytes(path)).get("indexDefinitions") or {}
        except ValueError as e:
            raise SchemaError(f"{path}: index definitions are not valid JSON: {e}") from e
        return defs

    @property
    def has_metadata_table(self) -> bool:
        return bool(self.config.metadata_partitions) or self.fileio.exists(
            join(self.paths.metadata_table, ".hoodie", "hoodie.properties")
        )
