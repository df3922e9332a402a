"""Logger factory and context binding for run and actor ids.

The library never configures structlog's output: applications do. Until they
do, actorflow is quiet, because its loggers filter below WARNING unless
``configure_logging`` (or the ``ACTORFLOW_LOG_LEVEL`` variable) says otherwise.
"""

from __future__ import annotations

import logging
import os
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = ["bound", "configure_logging", "env_level", "get_logger"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
# Importing never fails on a bad value: `RuntimeConfig.from_env` (so a default
# Runtime) and the command line refuse it by name (`env_level`).
_level = _LEVELS.get(os.environ.get("ACTORFLOW_LOG_LEVEL", "warning").strip().lower(), 30)


def env_level(env: Mapping[str, str] | None = None) -> int | None:
    """The level ``ACTORFLOW_LOG_LEVEL`` names, or None if it is not set.

    Raises:
        ConfigurationError: it names no level.
    """
    value = (os.environ if env is None else env).get("ACTORFLOW_LOG_LEVEL")
    if value is None:
        return None
    try:
        return _LEVELS[value.strip().lower()]
    except KeyError:
        from actorflow.errors import ConfigurationError  # errors build on this module

        raise ConfigurationError("ACTORFLOW_LOG_LEVEL", value, ", ".join(_LEVELS)) from None


_SECRET = re.compile(
    r"(^|_)(password|passwd|secret|token|api_?key|authorization|credentials?|private_key)$",
    re.IGNORECASE,
)


def _filter_by_level(_logger: Any, method: str, event_dict: Any) -> Any:
    if _LEVELS.get(method, 20) < _level:
        raise structlog.DropEvent
    # Secrets never reach a log, whatever the application's processors do.
    for key in event_dict:
        if _SECRET.search(key):
            event_dict[key] = "[redacted]"
    return event_dict


def get_logger(name: str) -> Any:
    """A structlog logger for an actorflow module; quiet below the configured level."""
    return structlog.wrap_logger(
        structlog.get_logger(name),
        processors=[_filter_by_level],
        # pass everything on to whatever the application configured
        wrapper_class=structlog.BoundLogger,
    )


def configure_logging(level: str | int = "info") -> None:
    """Set the level below which actorflow's own events are dropped.

    Does not touch structlog's global configuration: where the events go and
    how they look stays the application's choice.
    """
    global _level
    if isinstance(level, str):
        try:
            _level = _LEVELS[level.lower()]
        except KeyError:
            from actorflow.errors import ConfigurationError

            raise ConfigurationError("log level", level, ", ".join(_LEVELS)) from None
    else:
        _level = int(level)


def level() -> int:
    """The current threshold (a ``logging`` level number)."""
    return _level


def enabled(method: str = "info") -> bool:
    """Whether an event at ``method`` would be emitted; lets hot paths skip building it."""
    return _LEVELS.get(method, logging.INFO) >= _level


@contextmanager
def bound(**ids: str) -> Iterator[None]:
    """Bind ``run_id``, ``actor_id``... to every event logged in this context."""
    with structlog.contextvars.bound_contextvars(**ids):
        yield
