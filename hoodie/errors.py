"""The error tree of the format core. Every message names the path, instant, key or value at fault."""

from __future__ import annotations


class HoodieError(Exception):
    """Base class of every error raised by :mod:`hoodie`."""


class TableNotFoundError(HoodieError):
    """No Hudi table (``.hoodie/hoodie.properties``) at the given path."""


class UnsupportedTableError(HoodieError):
    """The table uses a version, layout or feature this implementation does not support."""


class InvalidTableConfigError(HoodieError):
    """``hoodie.properties`` is unreadable, fails its checksum, or holds an invalid value."""


class TimelineError(HoodieError):
    """An instant file is malformed, or a timeline transition is not allowed."""


class InstantExistsError(TimelineError):
    """A timeline file that must be created fresh already exists (never overwrite an instant)."""


class CorruptFileError(HoodieError):
    """A data, log or metadata file does not match the format (bad magic, truncated, undecodable)."""


class CorruptLogBlockError(CorruptFileError):
    """A log block is corrupt or truncated."""


class MalformedPlanError(CorruptFileError):
    """A plan or metadata payload on the timeline cannot be decoded."""


class SchemaError(HoodieError):
    """A schema is invalid, or data does not match the table's schema."""


class WriteConflictError(HoodieError):
    """A write would touch file groups that a pending table service owns."""


class InvalidInputError(HoodieError):
    """Input data is invalid for the requested operation (missing key, null ordering value, ...)."""


class TableServiceError(HoodieError):
    """A table service cannot run on this table or instant (the message says why)."""


class InstantBusyError(TableServiceError):
    """Another process keeps the instant's heartbeat alive: it is being executed elsewhere."""


class InstantNotPendingError(TableServiceError):
    """The instant is not pending any more (completed or rolled back meanwhile), or never was."""


class InstantTakenOverError(TableServiceError):
    """Another executor took over the instant this process was executing: it found our heartbeat expired
    and rolled our attempt back (``rollback`` names that rollback instant; None when our own heartbeat
    went late and the attempt stopped before anyone was seen taking it over). Nothing was completed.
    """

    def __init__(self, message: str, instant_time: str, rollback: str | None = None) -> None:
        super().__init__(message)
        self.instant_time = instant_time
        self.rollback = rollback

    def __reduce__(self) -> tuple[type[InstantTakenOverError], tuple[str, str, str | None]]:
        return type(self), (str(self), self.instant_time, self.rollback)


class UnsupportedShapeError(UnsupportedTableError):
    """The table's shape (:mod:`hoodie.shape`) makes hts refuse an operation, before anything is written.

    The message names the table, the shape, the evidence (``key=value`` or a file path), the
    refused operation and why (what Apache Hudi does that hts does not).
    """

    def __init__(self, where: str, shape: str, evidence: str, operation: str, reason: str) -> None:
        self.where = where
        self.shape = shape
        self.evidence = evidence
        self.operation = operation
        self.reason = reason
        super().__init__(
            f"{where}: {shape} table ({evidence}): {operation} is refused: {reason}. Nothing was written."
        )

    def __reduce__(self) -> tuple[type[UnsupportedShapeError], tuple[str, str, str, str, str]]:
        return type(self), (self.where, self.shape, self.evidence, self.operation, self.reason)
