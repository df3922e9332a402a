"""The actor runtime: actors, refs, mailboxes, supervision, runs and recovery."""

from __future__ import annotations

from actorflow.runtime._actor import Actor, Request, current_message_meta, handler, state_type
from actorflow.runtime._core import Runtime
from actorflow.runtime._mailbox import MailboxStatistics
from actorflow.runtime._ref import ActorRef
from actorflow.runtime._scope import ActorScope
from actorflow.runtime._supervisor import SupervisorPolicy

__all__ = [
    "Actor",
    "ActorRef",
    "ActorScope",
    "MailboxStatistics",
    "Request",
    "Runtime",
    "SupervisorPolicy",
    "current_message_meta",
    "handler",
    "state_type",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
