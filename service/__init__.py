"""The hts daemon and CLI."""
