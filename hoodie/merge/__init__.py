"""Record merging: merge modes, the vectorized fast path, the per-record engine, payloads."""
