"""hoodie: the Apache Hudi storage format in pure Python (pyarrow + fastavro).

Reads and writes Hudi tables of table versions 6, 8 and 9 exactly as Apache Hudi does.
The public entry point is :class:`hoodie.table.HoodieTable`.
"""

from __future__ import annotations

__version__ = "0.1.0"
