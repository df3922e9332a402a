"""The actor kernel: actors, mailboxes, refs, supervision, scopes and the actor system.

It knows nothing of workflows: the engine in :mod:`actorflow.runtime.workflow`
builds on the names this package exports, and imports nothing else of it.
Users import the public ones from :mod:`actorflow.runtime` (or ``actorflow``),
which also gives them their public ``__module__``.

For the engine:

- :meth:`ActorSystem.open_scope`: one scope of actor names per run, escalating to the run.
- :meth:`ActorSystem.spawn_now`: spawn an actor at the root from code that cannot await.
- :meth:`ActorSystem.require_running`: the task group the engine's own tasks join.
- :meth:`ActorRef.deliver`: queue a message with its meta now, wait for its reply later.
- :class:`ActorRef` is an interface: :class:`LocalRef` for an actor in this process; a
  ref to an agent elsewhere (``actorflow.ray.PlacedRef``) is its peer.
- :class:`AgentRef` and :class:`AgentReply`: what the engine needs of an agent and its
  reply; a reference to an agent in another process implements them.
- :func:`current_message_meta`: the meta a handler's message came with.
- :func:`actor_task_code`: the code every actor's task runs under (frames under
  it are an actor's own: the determinism guard leaves them alone).
- :func:`handler_for`, :func:`state_type`: an actor class's handler for a message
  type, and its state type; :func:`dispatch_table`, all its handlers (``handled``:
  the message types it takes, which a host of agents in another process needs).
- :func:`class_name`, :func:`lookup`, :func:`register`: classes by stable name;
  :func:`is_abstract`: a base class no run may resolve to.
"""

from __future__ import annotations

from actorflow.runtime.actors._actor import (
    Actor,
    Request,
    current_message_meta,
    dispatch_table,
    handler,
    handler_flow,
    handler_for,
    state_type,
)
from actorflow.runtime.actors._cell import actor_task_code
from actorflow.runtime.actors._envelope import Reply
from actorflow.runtime.actors._local import LocalRef
from actorflow.runtime.actors._mailbox import MailboxStatistics
from actorflow.runtime.actors._protocol import AgentRef, AgentReply
from actorflow.runtime.actors._ref import ActorRef
from actorflow.runtime.actors._registry import (
    class_name,
    is_abstract,
    lookup,
    module_of,
    register,
)
from actorflow.runtime.actors._scope import ActorScope
from actorflow.runtime.actors._supervisor import SupervisorPolicy
from actorflow.runtime.actors._system import ActorSystem

__all__ = [
    "Actor",
    "ActorRef",
    "ActorScope",
    "ActorSystem",
    "AgentRef",
    "AgentReply",
    "LocalRef",
    "MailboxStatistics",
    "Reply",
    "Request",
    "SupervisorPolicy",
    "actor_task_code",
    "class_name",
    "current_message_meta",
    "dispatch_table",
    "handler",
    "handler_flow",
    "handler_for",
    "is_abstract",
    "lookup",
    "module_of",
    "register",
    "state_type",
]
