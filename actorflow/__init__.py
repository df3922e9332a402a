"""actorflow: multi-agent workflows as actors that survive crashes."""

from __future__ import annotations

from actorflow import errors
from actorflow._log import configure_logging

__all__ = ["configure_logging", "errors"]
__version__ = "0.1.0"
