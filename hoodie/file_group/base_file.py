"""Base file names: ``<fileId>_<writeToken>_<instantTime>.<ext>``."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

BASE_PATTERN = (
    r"^(?P<file_id>[^_/]+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d+)\.(?P<ext>parquet|orc|hfile|lance)$"
)
"""A base file name's parts (also parsed over whole listings by :mod:`hoodie.file_group.file_index`)."""
_BASE_RE = re.compile(BASE_PATTERN)
_EXTENSIONS = {"PARQUET": "parquet", "ORC": "orc", "HFILE": "hfile", "LANCE": "lance"}


def new_file_id(index: int = 0) -> str:
    """A new file group id, ``<uuid>-<n>`` as Hudi makes them.

    A UUID whose first 8 characters are all decimal digits (2.3% of them) is drawn again: such an
    id has the simple bucket index's form, and a table whose every file group has it counts as a
    bucket table (:mod:`hoodie.index.bucket`).
    """
    while True:
        prefix = str(uuid.uuid4())
        if not prefix[:8].isdigit():
            return f"{prefix}-{index}"


def write_token(partition_id: int, stage_id: int, attempt_id: int) -> str:
    """Hudi's write token ``<taskPartitionId>-<stageId>-<taskAttemptId>``."""
    return f"{partition_id}-{stage_id}-{attempt_id}"


def extension_for(base_file_format: str) -> str:
    return _EXTENSIONS[base_file_format.upper()]


# Not frozen: planning builds these by the ten thousand and a frozen __init__ costs 3x; never mutated.
@dataclass(slots=True, unsafe_hash=True)
class BaseFile:
    """A base file of a file slice; ``commit_time`` is the requested time of the writing instant."""

    file_id: str
    write_token: str
    commit_time: str
    extension: str = "parquet"
    size: int = 0

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.commit_time}.{self.extension}"

    @classmethod
    def parse(cls, name: str, size: int = 0) -> BaseFile | None:
        """Parse a base file name; None if ``name`` is not one."""
        m = _BASE_RE.match(name)
        if not m:
            return None
        file_id, token, commit_time, extension = m.groups()
        return cls(file_id, token, commit_time, extension, size)

    def with_size(self, size: int) -> BaseFile:
        return BaseFile(self.file_id, self.write_token, self.commit_time, self.extension, size)
