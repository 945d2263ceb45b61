"""Read benchmark: our MERGE_ON_READ snapshot against hudi-rs and a pyarrow floor.

``python -m bench`` (``make bench``) generates a 2,000,000-row, one-file-group MOR table with
10% of its keys updated in an Avro log block (cached under ``var/bench/``), checks that every
reader returns the same merged rows, then prints best-of-N read times, the ratios against the
targets, and the peak memory of each read measured in a fresh process. See ``bench.cli``.
"""
