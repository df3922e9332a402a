"""Runtime options, settable in code and from ``ACTORFLOW_*`` environment variables."""

from __future__ import annotations

import enum
import functools
import math
import os
import typing
from typing import TYPE_CHECKING, Any

import msgspec

from actorflow._log import env_level
from actorflow.errors import ConfigurationError
from actorflow.runtime.flow import RetryPolicy
from actorflow.runtime.workflow._determinism import Determinism
from actorflow.storage import RetentionPolicy

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CheckpointTriggers", "Durability", "RuntimeConfig", "config_types", "parse_duration"]


def _check_int(obj: msgspec.Struct, name: str, *, minimum: int, optional: bool = False) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        expected = f"an integer >= {minimum}" + (" or None" if optional else "")
        raise ConfigurationError(name, value, expected)


def _check_number(
    obj: msgspec.Struct,
    name: str,
    *,
    minimum: float,
    maximum: float | None = None,
    optional: bool = False,
    positive: bool = False,
) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        ok = value > minimum if positive else value >= minimum
        if maximum is not None:
            ok = ok and value <= maximum
    if not ok:
        bound = f"> {minimum}" if positive else f">= {minimum}"
        if maximum is not None:
            bound += f" and <= {maximum}"
        raise ConfigurationError(
            name, value, f"a number {bound}" + (" or None" if optional else "")
        )
    if isinstance(value, int):  # an int is a fine number of seconds; store the float
        msgspec.structs.force_setattr(obj, name, float(value))


def _check_bool(obj: msgspec.Struct, name: str) -> None:
    value = getattr(obj, name)
    if not isinstance(value, bool):
        raise ConfigurationError(name, value, "True or False")


class Durability(enum.StrEnum):
    """When log records reach the disk.

    ``sync``: before the orchestrator sees a step's or a phase's result. ``batched``: in
    groups, and always before anything that could depend on them leaves the
    orchestrator (a message to an agent, a decision, the run's result).
    ``phase``: at phase ends; a crash repeats the open phase's steps.
    """

    SYNC = "sync"
    BATCHED = "batched"
    PHASE = "phase"


class CheckpointTriggers(msgspec.Struct, frozen=True, kw_only=True):
    """When the checkpoint actor takes a snapshot, besides phase starts and ends.

    Attributes:
        every_steps: after this many steps (``None``: off).
        every_seconds: at most this long after the previous snapshot (``None``: off).
        on_specialist_done: when a specialist's task completes.
        on_evaluation: when an evaluator replies.
        confidence_threshold: when an evaluator's confidence crosses it.
        on_error: when a step fails.
        memory_bytes: when the process's peak memory passes this (``None``: off).
        min_interval: seconds; a step's trigger (every one above) that fires
            sooner than this after the previous snapshot waits for the first
            record after the interval, so a burst of them makes one snapshot.
            ``ctx.checkpoint``, phase and final snapshots never wait.
    """

    every_steps: int | None = 100
    every_seconds: float | None = 30.0
    on_specialist_done: bool = False
    on_evaluation: bool = True
    confidence_threshold: float | None = 0.75
    on_error: bool = True
    memory_bytes: int | None = None
    min_interval: float = 1.0

    def __post_init__(self) -> None:
        _check_int(self, "every_steps", minimum=1, optional=True)
        _check_number(self, "every_seconds", minimum=0.0, optional=True)
        _check_bool(self, "on_specialist_done")
        _check_bool(self, "on_evaluation")
        _check_number(self, "confidence_threshold", minimum=0.0, maximum=1.0, optional=True)
        _check_bool(self, "on_error")
        _check_int(self, "memory_bytes", minimum=1, optional=True)
        _check_number(self, "min_interval", minimum=0.0)


class RuntimeConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Every runtime option with its default. See docs/configuration.md.

    Attributes:
        durability: see :class:`Durability`.
        flush_delay: in ``batched`` mode, the longest a recorded result stays
            only in memory, in seconds: a group commit starts this long after
            the first record it carries, whether or not anything depends on it.
            ``0`` starts it at the next turn of the event loop.
        triggers: see :class:`CheckpointTriggers`.
        retention: applied off the run's path after each finished run (``None``: never).
        retry: the default :class:`RetryPolicy` of asks (handlers, agent
            classes and calls may set their own); ``None``: the policy
            ``step_retries`` and ``retry_backoff`` make (:attr:`retry_policy`).
        step_retries: times a failed agent task is retried before
            ``StepFailedError`` (with no ``retry``: its ``max_attempts`` less one).
        retry_backoff: first retry delay in seconds; doubles per retry (with
            no ``retry``: its ``initial_backoff``).
        max_recovery_attempts: recovery attempts of one run in a row that make no
            progress (no record of their own durable) before it is marked failed.
        recovery_timeout: seconds one recovery may take (``None``: unbounded).
        ask_timeout: default timeout of ``ctx.ask`` in seconds (``None``: none).
        signal_poll_interval: how often, in seconds, a live run reads its
            inbox on a store with no inbox watch of its own, and how often
            ``runtime.update`` looks for its reply. (The memory and file
            stores push a wake-up; ``S3Store`` polls at its own
            ``inbox_poll_interval``.)
        max_signal_size: the largest encoded signal or update, in bytes, that
            ``signal`` and ``update`` accept (``SignalTooLargeError`` past it):
            every message is stored in the run's inbox and read by its owner.
        code_version: stored with new runs, shown by the CLI.
        determinism: what the determinism guard does when orchestrator code
            calls the clock, randomness or sleep outside ``ctx`` (see
            :class:`Determinism`): ``warn`` (a ``nondeterministic_call``
            warning per call site), ``strict`` (``NondeterministicCallError``)
            or ``off``.
        stream_emits: also write ephemeral emits (``Actor.emit``) to the
            store's event stream, where ``runtime.watch(..., events=True)``
            and ``actorflow log --follow`` read them from any process (stores
            that have one: memory, file). Off: they reach this process's
            ``handle.events()`` readers only.
        record_messages: keep each ``ask``'s and ``send``'s message in its
            step record (inline when small, else a blob of the run's), for
            the inspector and ``actorflow log`` to show. Off: only its hash
            is kept (what replay checks), for messages that must not be
            stored.
        tracing: OpenTelemetry spans and metrics of runs, whenever the
            ``otel`` extra is installed and an OpenTelemetry SDK provider is
            configured (see docs/observability.md). Off: none, whatever is
            configured.

    .. versionchanged:: 0.4
       ``max_signal_size``, ``stream_emits``.
    .. versionchanged:: 0.5
       ``determinism``, ``tracing``, ``retry``.
    .. versionchanged:: 0.6
       ``record_messages``.
    """

    durability: Durability = Durability.BATCHED
    flush_delay: float = 0.02
    triggers: CheckpointTriggers = CheckpointTriggers()
    retention: RetentionPolicy | None = RetentionPolicy()
    retry: RetryPolicy | None = None
    step_retries: int = 2
    retry_backoff: float = 0.05
    max_recovery_attempts: int = 3
    recovery_timeout: float | None = None
    ask_timeout: float | None = None
    signal_poll_interval: float = 0.25
    max_signal_size: int = 4 * 1024 * 1024
    code_version: str | None = None
    stream_emits: bool = True
    record_messages: bool = True
    determinism: Determinism = Determinism.WARN
    tracing: bool = True

    def __post_init__(self) -> None:
        # msgspec builds Structs without checking types: every field is checked
        # (or converted) here, so a wrong one fails now, not deep inside a run
        given: object = self.durability  # annotations are no promise: it may be a str
        if not isinstance(given, Durability):
            try:
                durability = Durability(str(given).strip().lower())
            except ValueError:
                raise ConfigurationError(
                    "durability", self.durability, "one of 'sync', 'batched', 'phase'"
                ) from None
            msgspec.structs.force_setattr(self, "durability", durability)
        mode: object = self.determinism
        if not isinstance(mode, Determinism):
            try:
                determinism = Determinism(str(mode).strip().lower())
            except ValueError:
                raise ConfigurationError(
                    "determinism", self.determinism, "one of 'warn', 'strict', 'off'"
                ) from None
            msgspec.structs.force_setattr(self, "determinism", determinism)
        triggers: object = self.triggers
        if isinstance(triggers, dict):
            msgspec.structs.force_setattr(self, "triggers", CheckpointTriggers(**triggers))
        elif not isinstance(triggers, CheckpointTriggers):
            raise ConfigurationError("triggers", triggers, "a CheckpointTriggers")
        retention: object = self.retention
        if retention is not None:
            if not isinstance(retention, RetentionPolicy):
                raise ConfigurationError("retention", retention, "a RetentionPolicy or None")
            _check_int(retention, "keep_last", minimum=1, optional=True)
            _check_bool(retention, "keep_per_phase")
            _check_number(retention, "max_age", minimum=0.0, optional=True)
            _check_bool(retention, "delete_completed")
            _check_bool(retention, "keep_phase_ends")
            _check_int(retention, "max_total_bytes", minimum=1, optional=True)
        _check_number(self, "flush_delay", minimum=0.0)
        _check_int(self, "step_retries", minimum=0)
        _check_number(self, "retry_backoff", minimum=0.0)
        retry: object = self.retry
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError("retry", retry, "a RetryPolicy or None")
        _check_int(self, "max_recovery_attempts", minimum=1)
        _check_number(self, "recovery_timeout", minimum=0.0, optional=True, positive=True)
        _check_number(self, "ask_timeout", minimum=0.0, optional=True, positive=True)
        _check_number(self, "signal_poll_interval", minimum=0.0, positive=True)
        _check_int(self, "max_signal_size", minimum=1)
        _check_bool(self, "stream_emits")
        _check_bool(self, "record_messages")
        _check_bool(self, "tracing")
        code_version: object = self.code_version
        if code_version is not None and not isinstance(code_version, str):
            raise ConfigurationError("code_version", self.code_version, "a string or None")

    @property
    def retry_policy(self) -> RetryPolicy:
        """The default retry policy: ``retry``, or from ``step_retries`` and ``retry_backoff``."""
        if self.retry is not None:
            return self.retry
        return _default_policy(self.step_retries, self.retry_backoff)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RuntimeConfig:
        """Read ``ACTORFLOW_*`` variables; keyword ``overrides`` win over them.

        Variables: ``ACTORFLOW_DURABILITY`` (sync|batched|phase),
        ``ACTORFLOW_FLUSH_DELAY`` (a duration such as ``20ms``),
        ``ACTORFLOW_RETENTION`` (``keep=5,max_age=7d`` or ``off``),
        ``ACTORFLOW_STEP_RETRIES``, ``ACTORFLOW_MAX_RECOVERY_ATTEMPTS``,
        ``ACTORFLOW_RECOVERY_TIMEOUT`` (a duration), ``ACTORFLOW_SIGNAL_POLL_INTERVAL``
        (a duration), ``ACTORFLOW_MAX_SIGNAL_SIZE`` (bytes), ``ACTORFLOW_CHECKPOINT_EVERY_STEPS``,
        ``ACTORFLOW_CHECKPOINT_EVERY`` (a duration),
        ``ACTORFLOW_CHECKPOINT_MIN_INTERVAL`` (a duration), ``ACTORFLOW_CODE_VERSION``,
        ``ACTORFLOW_DETERMINISM`` (warn|strict|off), ``ACTORFLOW_TRACING`` (on|off);
        ``ACTORFLOW_LOG_LEVEL`` is checked too (actorflow reads it when imported).

        Raises:
            ConfigurationError: a variable has a value that cannot be used.
        """
        env = os.environ if env is None else env
        env_level(env)  # read when actorflow was imported; a bad one is refused here by name
        values: dict[str, Any] = {}
        if (v := env.get("ACTORFLOW_DURABILITY")) is not None:
            try:
                values["durability"] = Durability(v.strip().lower())
            except ValueError:
                raise ConfigurationError(
                    "ACTORFLOW_DURABILITY", v, "sync, batched or phase"
                ) from None
        if (v := env.get("ACTORFLOW_FLUSH_DELAY")) is not None:
            values["flush_delay"] = parse_duration(v, option="ACTORFLOW_FLUSH_DELAY")
        if (v := env.get("ACTORFLOW_RETENTION")) is not None:
            values["retention"] = _parse_retention(v)
        for var, field in (
            ("ACTORFLOW_STEP_RETRIES", "step_retries"),
            ("ACTORFLOW_MAX_RECOVERY_ATTEMPTS", "max_recovery_attempts"),
            ("ACTORFLOW_MAX_SIGNAL_SIZE", "max_signal_size"),
        ):
            if (v := env.get(var)) is not None:
                values[field] = _parse_int(var, v)
        if (v := env.get("ACTORFLOW_RECOVERY_TIMEOUT")) is not None:
            values["recovery_timeout"] = parse_duration(v, option="ACTORFLOW_RECOVERY_TIMEOUT")
        if (v := env.get("ACTORFLOW_SIGNAL_POLL_INTERVAL")) is not None:
            values["signal_poll_interval"] = parse_duration(
                v, option="ACTORFLOW_SIGNAL_POLL_INTERVAL"
            )
        if (v := env.get("ACTORFLOW_CODE_VERSION")) is not None:
            values["code_version"] = v
        if (v := env.get("ACTORFLOW_DETERMINISM")) is not None:
            values["determinism"] = v
        if (v := env.get("ACTORFLOW_TRACING")) is not None:
            values["tracing"] = _parse_switch("ACTORFLOW_TRACING", v)
        triggers: dict[str, Any] = {}
        if (v := env.get("ACTORFLOW_CHECKPOINT_EVERY_STEPS")) is not None:
            triggers["every_steps"] = _parse_int("ACTORFLOW_CHECKPOINT_EVERY_STEPS", v) or None
        if (v := env.get("ACTORFLOW_CHECKPOINT_EVERY")) is not None:
            triggers["every_seconds"] = parse_duration(v, option="ACTORFLOW_CHECKPOINT_EVERY")
        if (v := env.get("ACTORFLOW_CHECKPOINT_MIN_INTERVAL")) is not None:
            triggers["min_interval"] = parse_duration(v, option="ACTORFLOW_CHECKPOINT_MIN_INTERVAL")
        try:
            if triggers:
                values["triggers"] = CheckpointTriggers(**triggers)
            config = cls(**values)
        except ConfigurationError as exc:
            # name the variable that was set, not the field it became
            variable = _VARIABLES.get(exc.option)
            text = env.get(variable) if variable is not None else None
            if variable is None or text is None:
                raise
            raise ConfigurationError(variable, text, exc.expected) from None
        return msgspec.structs.replace(config, **overrides) if overrides else config


@functools.cache
def _default_policy(step_retries: int, retry_backoff: float) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=step_retries + 1,
        initial_backoff=retry_backoff,
        max_backoff=max(60.0, retry_backoff),
    )


_VARIABLES = {
    "durability": "ACTORFLOW_DURABILITY",
    "flush_delay": "ACTORFLOW_FLUSH_DELAY",
    "step_retries": "ACTORFLOW_STEP_RETRIES",
    "max_recovery_attempts": "ACTORFLOW_MAX_RECOVERY_ATTEMPTS",
    "recovery_timeout": "ACTORFLOW_RECOVERY_TIMEOUT",
    "signal_poll_interval": "ACTORFLOW_SIGNAL_POLL_INTERVAL",
    "max_signal_size": "ACTORFLOW_MAX_SIGNAL_SIZE",
    "code_version": "ACTORFLOW_CODE_VERSION",
    "determinism": "ACTORFLOW_DETERMINISM",
    "tracing": "ACTORFLOW_TRACING",
    "every_steps": "ACTORFLOW_CHECKPOINT_EVERY_STEPS",
    "every_seconds": "ACTORFLOW_CHECKPOINT_EVERY",
    "min_interval": "ACTORFLOW_CHECKPOINT_MIN_INTERVAL",
    "keep_last": "ACTORFLOW_RETENTION",
    "max_age": "ACTORFLOW_RETENTION",
    "max_total_bytes": "ACTORFLOW_RETENTION",
}
"""Which ``ACTORFLOW_*`` variable sets each field (for errors that name it)."""

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str, *, option: str = "duration") -> float:
    """Seconds in ``text``: ``90``, ``1.5s``, ``250ms``, ``10m``, ``2h``, ``7d``, ``1w``.

    Raises:
        ConfigurationError: ``text`` is not a non-negative duration.
    """
    raw = text.strip().lower()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if raw.endswith(unit):
            number, factor = raw[: -len(unit)], _UNITS[unit]
            break
    else:
        number, factor = raw, 1.0
    try:
        seconds = float(number) * factor
    except ValueError:
        raise ConfigurationError(option, text, "a duration such as 30s, 10m, 2h or 7d") from None
    if not math.isfinite(seconds):
        raise ConfigurationError(option, text, "a finite duration such as 30s, 10m, 2h or 7d")
    if seconds < 0:
        raise ConfigurationError(option, text, "a duration >= 0")
    return seconds


def _parse_switch(option: str, text: str) -> bool:
    raw = text.strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(option, text, "on or off (1/0, true/false, yes/no)")


def _parse_int(option: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigurationError(option, text, "an integer") from None


_RETENTION_FIELDS = {
    "keep": "keep_last",
    "keep_last": "keep_last",
    "max_age": "max_age",
    "max_bytes": "max_total_bytes",
    "max_total_bytes": "max_total_bytes",
    "delete_completed": "delete_completed",
    "per_phase": "keep_per_phase",
    "phase_ends": "keep_phase_ends",
}
"""The keys ``ACTORFLOW_RETENTION`` takes, and the policy field each sets."""


def _parse_retention(text: str) -> RetentionPolicy | None:
    raw = text.strip().lower()
    if raw in ("off", "none", "0", ""):
        return None
    values: dict[str, Any] = {}
    given: dict[str, str] = {}  # field -> the key that set it: each field once
    for part in raw.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigurationError("ACTORFLOW_RETENTION", text, "key=value pairs or 'off'")
        field = _RETENTION_FIELDS.get(key)
        if field is not None and field in given:
            raise ConfigurationError(
                "ACTORFLOW_RETENTION", text, f"each key once ({given[field]} and {key} both given)"
            )
        if field is not None:
            given[field] = key
        if key in ("keep", "keep_last"):
            values["keep_last"] = _parse_int("ACTORFLOW_RETENTION keep", value)
        elif key == "max_age":
            values["max_age"] = parse_duration(value, option="ACTORFLOW_RETENTION max_age")
        elif key in ("max_bytes", "max_total_bytes"):
            values["max_total_bytes"] = _parse_int("ACTORFLOW_RETENTION max_bytes", value)
        elif key == "delete_completed":
            values["delete_completed"] = value.strip() in ("1", "true", "yes", "on")
        elif key == "per_phase":
            values["keep_per_phase"] = value.strip() in ("1", "true", "yes", "on")
        elif key == "phase_ends":
            values["keep_phase_ends"] = value.strip() in ("1", "true", "yes", "on")
        else:
            raise ConfigurationError(
                "ACTORFLOW_RETENTION",
                text,
                "keys keep, max_age, max_bytes, delete_completed, per_phase, phase_ends",
            )
    return RetentionPolicy(**values)


def config_types() -> dict[str, Any]:
    """Each ``RuntimeConfig`` field's type, to decode one field by field.

    Resolved in this module, the one namespace where every annotation does:
    ``actorflow.runtime`` re-exports the class under its own name.
    """
    return typing.get_type_hints(RuntimeConfig, globalns=globals())
