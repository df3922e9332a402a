"""The store side of ``fork``: a new run whose past is an old run's, up to a snapshot.

A fork may start with some agents' states replaced (``edit``). The new states
are checked against each agent's state type and encoded before anything is
stored (:func:`encode_edits`), and put into the copied snapshot in one place
(:func:`apply_edits`), so how a checkpoint is loaded can change without them.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING

import msgspec

from actorflow.errors import (
    ConfigurationError,
    EncodingError,
    IncompatibleStateError,
    InvalidStateEditError,
    UnknownEditedAgentError,
)
from actorflow.runtime.actors import lookup, state_type
from actorflow.runtime.workflow._agents import INLINE_STATE_BYTES
from actorflow.runtime.workflow._triggers import Trigger
from actorflow.storage import (
    AgentSnapshot,
    ForkEdit,
    RunManifest,
    RunStatus,
    StateRef,
    decode_state,
    encode_state,
    read_full_snapshot,
    state_version,
    sync_snapshots,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from actorflow.storage import Snapshot, Store

__all__ = ["EditedState", "apply_edits", "copy_for_fork", "encode_edits"]


class EditedState(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's new state for a fork, checked and encoded, not stored yet."""

    agent: str
    type: str
    version: int
    data: bytes

    @property
    def record(self) -> ForkEdit:
        """What the fork's manifest says of this edit."""
        return ForkEdit(
            agent=self.agent, type=self.type, state_hash=hashlib.sha256(self.data).hexdigest()
        )


async def copy_for_fork(
    store: Store,
    source: RunManifest,
    checkpoint: str,
    new_id: str,
    edit: Mapping[str, object] | None = None,
) -> RunManifest:
    """Create run ``new_id`` whose past is ``source``'s up to ``checkpoint``.

    The new run's first snapshot is the old one, its agents' state blobs
    copied under the new run (blobs belong to one run; encrypted ones are
    bound to it), and the states ``edit`` gives in place of those of the
    agents it names (see :func:`encode_edits`). Its log starts empty, right
    after that snapshot, which is therefore the only copy of the new run's
    past and is made durable.

    Raises:
        CheckpointNotFoundError: ``source`` has no such checkpoint.
        ConfigurationError: a run with ``new_id`` exists.
        UnknownEditedAgentError: ``edit`` names an agent the checkpoint lacks
            (nothing stored).
        InvalidStateEditError: a new state does not fit its agent's state
            type (nothing stored).
    """
    # whole: the new run's history starts with this snapshot (chunks belong to one run)
    snapshot = await read_full_snapshot(store, source.run_id, checkpoint)
    edits = encode_edits(snapshot, edit or {}, source.run_id, checkpoint)
    now = time.time()
    manifest = RunManifest(
        run_id=new_id,
        workflow=source.workflow,
        workflow_module=source.workflow_module,
        input=source.input,
        input_hash=source.input_hash,
        code_version=source.code_version,
        status=RunStatus.INTERRUPTED,
        created=now,
        updated=now,
        parent=source.run_id,
        parent_snapshot=checkpoint,
        fork_edits=tuple(e.record for e in edits),
    )
    stored, created = await store.create_run(manifest)
    if not created:
        raise ConfigurationError("new_run_id", new_id, "an id that no run has yet")
    edited = {e.agent for e in edits}
    agents: dict[str, AgentSnapshot] = {}
    for name, agent in snapshot.agents.items():
        ref = agent.state
        if name not in edited and ref is not None and ref.data is None and ref.blob:
            blob = await store.put_blob(new_id, await store.get_blob(source.run_id, ref.blob))
            ref = msgspec.structs.replace(ref, blob=blob)
        agents[name] = msgspec.structs.replace(agent, state=ref)
    copied = msgspec.structs.replace(snapshot, agents=agents)
    first = await store.write_snapshot(
        msgspec.structs.replace(
            await apply_edits(store, new_id, copied, edits),
            run_id=new_id,
            snapshot_id=f"0000-fork-of-{snapshot.snapshot_id}",
            position=0,
            status=RunStatus.RUNNING,
            trigger=Trigger.FORK,
        )
    )
    await sync_snapshots(store, new_id, [first.snapshot_id])
    return stored


def encode_edits(
    snapshot: Snapshot, edit: Mapping[str, object], run_id: str, checkpoint: str
) -> list[EditedState]:
    """Each new state of ``edit`` checked against its agent's state type, and encoded.

    A new state is a value of the agent's state type, or plain data (what
    JSON decodes to) converted to it with ``msgspec.convert``; keys the type
    has no field for are refused, not dropped. Nothing is stored.

    Raises:
        UnknownEditedAgentError: ``snapshot`` holds no agent of a name ``edit`` gives.
        InvalidStateEditError: a new state does not fit the agent's state type.
        RegistryError: an agent's class cannot be found in this process.
    """
    edits = []
    for name, value in edit.items():
        agent = snapshot.agents.get(name)
        if agent is None:
            raise UnknownEditedAgentError(run_id, checkpoint, name, tuple(snapshot.agents))
        cls = state_type(lookup(agent.type, agent.module))
        try:
            data = _encode_new_state(value, cls)
        except _MisfitError as exc:
            raise InvalidStateEditError(
                run_id, checkpoint, name, _type_name(cls), exc.path, exc.problem
            ) from exc.__cause__
        edits.append(
            EditedState(agent=name, type=agent.type, version=state_version(cls), data=data)
        )
    return edits


async def apply_edits(
    store: Store, run_id: str, snapshot: Snapshot, edits: list[EditedState]
) -> Snapshot:
    """``snapshot`` with each edited agent's state replaced by its new one.

    A new state travels inside the snapshot when small, as a step's does;
    a larger one is first stored as a blob of ``run_id`` (the new run).
    """
    agents = dict(snapshot.agents)
    for edit in edits:
        agent = agents[edit.agent]
        # as the state it replaces (the agent's snapshot keeps the class's module)
        module = agent.state.module if agent.state is not None else None
        ref = StateRef(
            agent=edit.agent, type=agent.type, version=edit.version, data=edit.data, module=module
        )
        if len(edit.data) > INLINE_STATE_BYTES:
            ref = msgspec.structs.replace(
                ref, data=None, blob=await store.put_blob(run_id, edit.data)
            )
        agents[edit.agent] = msgspec.structs.replace(agent, state=ref)
    return msgspec.structs.replace(snapshot, agents=agents)


_AT = re.compile(r"^(?P<problem>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.DOTALL)


class _MisfitError(Exception):
    """Where and how a new state does not fit its type (msgspec's ``- at `$.x``` split off)."""

    def __init__(self, message: str, path: str | None = None) -> None:
        found = _AT.match(message)
        self.problem = found["problem"] if found is not None else message
        self.path = path or (found["path"] if found is not None else None) or "$"
        super().__init__(message)


def _encode_new_state(value: object, cls: type) -> bytes:
    """``value`` as ``cls``, encoded.

    Raises:
        _MisfitError: it does not fit ``cls``, or holds a key ``cls`` has no field for.
    """
    given = isinstance(cls, type) and isinstance(value, cls)
    try:
        typed = value if given else msgspec.convert(value, cls)
        data = encode_state(typed, what="the new state")
        # a value built in code is not checked on construction: read it back as a recovery would
        decode_state(data, cls, version=state_version(cls))
    except msgspec.ValidationError as exc:
        raise _MisfitError(str(exc)) from exc
    except (EncodingError, IncompatibleStateError) as exc:
        cause = exc.__cause__
        raise _MisfitError(str(cause) if cause is not None else str(exc)) from exc
    unknown = None if given else _unknown_key(value, msgspec.to_builtins(typed), "$")
    if unknown is not None:
        raise _MisfitError("no such field", unknown)
    return data


def _unknown_key(given: object, kept: object, path: str) -> str | None:
    """The path of the first key of ``given`` that converting it dropped, if any."""
    if isinstance(given, dict) and isinstance(kept, dict):
        names = {str(k): v for k, v in kept.items()}
        for key, value in given.items():
            if str(key) not in names:
                return f"{path}.{key}"
            found = _unknown_key(value, names[str(key)], f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(given, list | tuple) and isinstance(kept, list | tuple):
        for i, (one, other) in enumerate(zip(given, kept, strict=False)):
            found = _unknown_key(one, other, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _type_name(cls: object) -> str:
    return getattr(cls, "__qualname__", None) or repr(cls)
