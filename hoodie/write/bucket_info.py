"""What one file group receives in a write (Hudi's ``BucketInfo`` of the ``UpsertPartitioner``):
a new file group, a merge into a base file, or an append to a file slice's log."""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodie.file_group.file_slice import FileSlice


@dataclass
class Bucket:
    """The records one file group receives in this write."""

    kind: str  # "create", "merge" or "append"
    partition: str
    file_id: str
    file_slice: FileSlice | None = None
    rows: list[int] = field(default_factory=list)  # indices into the prepared input: data rows
    deletes: list[int] = field(default_factory=list)  # indices: keys to delete
    concat: bool = False
    inserts: list[int] = field(default_factory=list)  # indices: rows new to the table (small-file inserts)
