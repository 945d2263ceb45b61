"""The daemon's error tree; every message names the table, instant, setting or value at fault."""

from __future__ import annotations


class ServiceError(Exception):
    """Base class of the daemon's own errors."""


class ConfigError(ServiceError):
    """The settings are invalid (the message names the setting and the value)."""


class NotFound(ServiceError):
    """No such table, run or instant."""


class Conflict(ServiceError):
    """The request conflicts with the current state (paused table, instant already running, ...)."""


class BadRequest(ServiceError):
    """The request is malformed or names an unsupported service or option."""
