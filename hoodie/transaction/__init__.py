"""Table locks and instant-time generation (Hudi's TrueTime rule)."""
