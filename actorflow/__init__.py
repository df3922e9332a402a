"""actorflow: multi-agent workflows as actors that survive crashes."""

from __future__ import annotations

from actorflow import errors
from actorflow._log import configure_logging
from actorflow.runtime import Actor, ActorRef, Request, Runtime, SupervisorPolicy, handler

__all__ = [
    "Actor",
    "ActorRef",
    "Request",
    "Runtime",
    "SupervisorPolicy",
    "configure_logging",
    "errors",
    "handler",
]
__version__ = "0.1.0"
