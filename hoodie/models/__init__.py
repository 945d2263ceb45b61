"""Typed models of Hudi's timeline plans and metadata, and their exact bytes (:mod:`hoodie.models.codec`)."""

from __future__ import annotations
