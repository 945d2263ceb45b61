"""The metadata table (``<base>/.hoodie/metadata``): keys, payloads, reading, writing, syncing."""
