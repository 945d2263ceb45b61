"""Table shapes: what a table's writers chose that changes what hts must put on disk.

:mod:`hoodie.shape.matrix` holds the decision matrix (shape x operation -> handled or refused, with
Hudi's reason); :mod:`hoodie.shape.table_shape` computes a table's shape from storage and the
declared options (``HoodieTable.shape(options)``) and checks operations against the matrix.
"""

from hoodie.shape.matrix import MATRIX, OPERATIONS, Shape, cell, refuse_on_open

__all__ = ["MATRIX", "OPERATIONS", "Shape", "cell", "refuse_on_open"]
