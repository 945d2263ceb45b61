"""Log file names: ``.<fileId>_<instant>.log.<version>_<writeToken>[.cdc]``.

The ``<instant>`` is the slice's base instant in table version 6 and the writing delta
commit's requested time in versions 8 and 9.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOG_PATTERN = (
    r"^\.(?P<file_id>[^._][^_]*?)_(?P<instant>[^._]*)\.(?P<ext>log|archive)\.(?P<version>\d+)"
    r"(?:_(?P<token>\d+-\d+-\d+))?(?P<suffix>\.cdc)?$"
)
"""A log file name's parts (also parsed over whole listings by :mod:`hoodie.file_group.file_index`)."""
_LOG_RE = re.compile(LOG_PATTERN)


# Not frozen: planning builds these by the ten thousand and a frozen __init__ costs 3x; never mutated.
@dataclass(slots=True, unsafe_hash=True)
class LogFile:
    """One log file of a file group."""

    file_id: str
    instant_time: str
    version: int
    write_token: str | None
    extension: str = "log"
    suffix: str = ""
    size: int = 0

    @property
    def name(self) -> str:
        token = f"_{self.write_token}" if self.write_token is not None else ""
        return f".{self.file_id}_{self.instant_time}.{self.extension}.{self.version}{token}{self.suffix}"

    @classmethod
    def parse(cls, name: str, size: int = 0) -> LogFile | None:
        """Parse a log file name; None if ``name`` is not one."""
        m = _LOG_RE.match(name)
        if not m:
            return None
        file_id, instant, ext, version, token, cdc = m.groups()
        return cls(file_id, instant, int(version), token, ext, cdc or "", size)

    @property
    def is_cdc(self) -> bool:
        return self.suffix == ".cdc"

    @property
    def sort_key(self) -> tuple[str, int, tuple[int, str], str]:
        """Hudi's log-file order: instant, then version, then write token (missing first), then suffix."""
        token = (0, "") if self.write_token is None else (1, self.write_token)
        return (self.instant_time, self.version, token, self.suffix)

    def __lt__(self, other: LogFile) -> bool:
        return (self.file_id, self.sort_key) < (other.file_id, other.sort_key)

    def with_size(self, size: int) -> LogFile:
        return LogFile(
            self.file_id, self.instant_time, self.version, self.write_token, self.extension, self.suffix, size
        )

    def next_version(self, write_token: str) -> LogFile:
        return LogFile(
            self.file_id, self.instant_time, self.version + 1, write_token, self.extension, self.suffix
        )
