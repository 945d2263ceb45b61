"""Reading Hudi tables: log scanning, merging file slices, and the query types."""
