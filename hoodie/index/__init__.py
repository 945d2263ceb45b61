"""Hudi's indexes as they show on storage (bucket file ids, ...)."""
