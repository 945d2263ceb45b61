"""Where a table keeps its timeline and auxiliary folders, per timeline layout."""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodie.config.table_config import METAFOLDER, TableConfig, TableKeys
from hoodie.io.fileio import join


@dataclass(frozen=True, slots=True)
class TablePaths:
    """The folders of one table (paths in the FileIO's namespace)."""

    base_path: str
    layout: int
    timeline_folder: str = "timeline"
    history_folder: str = "history"
    archive_folder: str = "archived"
    meta: str = field(init=False, compare=False, repr=False)
    """``.hoodie/``."""
    timeline: str = field(init=False, compare=False, repr=False)
    """The active timeline: ``.hoodie/`` in layout 1, ``.hoodie/timeline/`` in layout 2."""

    def __post_init__(self) -> None:
        # Worked out once: the daemon asks for a table's timeline folder on every watch tick.
        meta = join(self.base_path, METAFOLDER)
        object.__setattr__(self, "meta", meta)
        object.__setattr__(self, "timeline", meta if self.layout < 2 else join(meta, self.timeline_folder))

    @classmethod
    def of(cls, base_path: str, config: TableConfig) -> TablePaths:
        return cls(
            base_path=base_path,
            layout=config.timeline_layout,
            timeline_folder=config.get(TableKeys.TIMELINE_PATH) or "timeline",
            history_folder=config.get(TableKeys.TIMELINE_HISTORY_PATH) or "history",
            archive_folder=config.get(TableKeys.ARCHIVELOG_FOLDER) or "archived",
        )

    @property
    def history(self) -> str:
        """The LSM archived timeline (layout 2)."""
        return join(self.timeline, self.history_folder)

    @property
    def archived(self) -> str:
        """The layout-1 archived timeline folder."""
        return join(self.meta, self.archive_folder)

    @property
    def heartbeat(self) -> str:
        return join(self.meta, ".heartbeat")

    @property
    def temp(self) -> str:
        return join(self.meta, ".temp")

    @property
    def metadata_table(self) -> str:
        return join(self.meta, "metadata")

    def markers(self, instant_time: str) -> str:
        return join(self.temp, instant_time)

    def partition(self, partition_path: str) -> str:
        return join(self.base_path, partition_path)
