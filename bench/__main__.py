"""Entry point of ``python -m bench`` (``make bench``)."""

from __future__ import annotations

from bench.cli import main

raise SystemExit(main())
