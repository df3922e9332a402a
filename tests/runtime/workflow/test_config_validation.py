"""RuntimeConfig checks every field when it is built: converted, or refused by name.

msgspec Structs do not check types when constructed, so a wrong value would
otherwise surface much later, deep inside a run (a string durability compared
with an enum member, a negative retry count, a string timeout handed to
``anyio.move_on_after``). Each field is converted (``durability="sync"`` is
``Durability.SYNC``) or refused with ``ConfigurationError`` naming the field,
the value and what is expected. ``CheckpointTriggers`` (the ``triggers`` field)
checks its own fields the same way, and ``from_env`` names the variable.
"""

from __future__ import annotations

from typing import Any

import pytest

from actorflow import CheckpointTriggers, Durability, RuntimeConfig
from actorflow.errors import ConfigurationError
from actorflow.storage import RetentionPolicy

# --- durability ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sync", Durability.SYNC),
        ("batched", Durability.BATCHED),
        ("phase", Durability.PHASE),
        (Durability.PHASE, Durability.PHASE),
    ],
)
def test_durability_given_as_a_string_is_converted_to_the_enum(
    given: Any, expected: Durability
) -> None:
    config = RuntimeConfig(durability=given)
    assert config.durability is expected
    assert type(config.durability) is Durability


def test_a_converted_durability_behaves_as_the_enum() -> None:
    given: Any = "sync"
    config = RuntimeConfig(durability=given)
    assert config == RuntimeConfig(durability=Durability.SYNC)
    assert config.durability is Durability.SYNC


@pytest.mark.parametrize("bad", ["bogus", "", "fsync", 1, None, True])
def test_an_unknown_durability_is_refused_naming_the_field_and_the_allowed_values(
    bad: Any,
) -> None:
    with pytest.raises(ConfigurationError) as info:
        RuntimeConfig(durability=bad)
    message = str(info.value)
    assert "durability" in message, message
    for allowed in ("sync", "batched", "phase"):
        assert allowed in message, f"{allowed!r} is not named: {message}"


# --- every other field: wrong types and out-of-range numbers --------------------------------

BAD_VALUES: list[tuple[str, Any]] = [
    ("triggers", "often"),
    ("triggers", 10),
    ("triggers", None),
    ("retention", 5),
    ("retention", "keep=5"),
    ("step_retries", -1),
    ("step_retries", 1.5),
    ("step_retries", "2"),
    ("step_retries", None),
    ("step_retries", True),
    ("retry_backoff", -0.1),
    ("retry_backoff", "fast"),
    ("retry_backoff", None),
    ("retry_backoff", float("nan")),
    ("max_recovery_attempts", 0),
    ("max_recovery_attempts", -3),
    ("max_recovery_attempts", "3"),
    ("max_recovery_attempts", 2.5),
    ("max_recovery_attempts", None),
    ("recovery_timeout", -1.0),
    ("recovery_timeout", "10m"),
    ("recovery_timeout", float("nan")),
    ("ask_timeout", -5),
    ("ask_timeout", "soon"),
    ("ask_timeout", float("nan")),
    ("code_version", 3),
    ("code_version", b"v1"),
]


@pytest.mark.parametrize(("field", "bad"), BAD_VALUES, ids=[f"{f}={v!r}" for f, v in BAD_VALUES])
def test_a_bad_value_is_refused_at_construction_naming_the_field(field: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        RuntimeConfig(**{field: bad})
    message = str(info.value)
    assert field in message, f"the field is not named: {message}"
    assert repr(bad) in message or str(bad) in message, f"the value is not named: {message}"


GOOD_VALUES: list[tuple[str, Any]] = [
    ("triggers", CheckpointTriggers(every_steps=None, every_seconds=None)),
    ("retention", None),
    ("retention", RetentionPolicy(keep_last=1)),
    ("step_retries", 0),
    ("retry_backoff", 0),
    ("retry_backoff", 0.5),
    ("max_recovery_attempts", 1),
    ("recovery_timeout", None),
    ("recovery_timeout", 30),
    ("ask_timeout", None),
    ("ask_timeout", 0.25),
    ("code_version", None),
    ("code_version", "2025.1"),
]


@pytest.mark.parametrize(("field", "good"), GOOD_VALUES, ids=[f"{f}={v!r}" for f, v in GOOD_VALUES])
def test_good_values_are_accepted(field: str, good: Any) -> None:
    config = RuntimeConfig(**{field: good})
    assert getattr(config, field) == good


# --- the triggers field's own fields ---------------------------------------------------------

BAD_TRIGGERS: list[tuple[str, Any]] = [
    ("every_steps", -1),
    ("every_steps", "100"),
    ("every_steps", 2.5),
    ("every_seconds", -1.0),
    ("every_seconds", "30s"),
    ("on_specialist_done", "yes"),
    ("on_evaluation", 1),
    ("on_error", None),
    ("confidence_threshold", 1.5),
    ("confidence_threshold", -0.1),
    ("confidence_threshold", "high"),
    ("memory_bytes", -1),
    ("memory_bytes", "1GB"),
]


@pytest.mark.parametrize(
    ("field", "bad"), BAD_TRIGGERS, ids=[f"{f}={v!r}" for f, v in BAD_TRIGGERS]
)
def test_a_bad_trigger_is_refused_at_construction_naming_the_field(field: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        CheckpointTriggers(**{field: bad})
    assert field in str(info.value), str(info.value)


# --- from_env ---------------------------------------------------------------------------------

BAD_ENV: list[tuple[str, str]] = [
    ("ACTORFLOW_DURABILITY", "bogus"),
    ("ACTORFLOW_DURABILITY", ""),
    ("ACTORFLOW_STEP_RETRIES", "many"),
    ("ACTORFLOW_STEP_RETRIES", "-1"),
    ("ACTORFLOW_STEP_RETRIES", "1.5"),
    ("ACTORFLOW_MAX_RECOVERY_ATTEMPTS", "0"),
    ("ACTORFLOW_MAX_RECOVERY_ATTEMPTS", "lots"),
    ("ACTORFLOW_RECOVERY_TIMEOUT", "-5"),
    ("ACTORFLOW_RECOVERY_TIMEOUT", "soon"),
    ("ACTORFLOW_RECOVERY_TIMEOUT", "nan"),
    ("ACTORFLOW_CHECKPOINT_EVERY_STEPS", "-3"),
    ("ACTORFLOW_CHECKPOINT_EVERY_STEPS", "often"),
    ("ACTORFLOW_CHECKPOINT_EVERY", "-1s"),
    ("ACTORFLOW_CHECKPOINT_EVERY", "whenever"),
    ("ACTORFLOW_RETENTION", "keep=-1"),
    ("ACTORFLOW_RETENTION", "keep=lots"),
    ("ACTORFLOW_RETENTION", "max_age=-1d"),
    ("ACTORFLOW_RETENTION", "max_bytes=-10"),
    ("ACTORFLOW_RETENTION", "forever"),
    ("ACTORFLOW_RETENTION", "colour=blue"),
]


@pytest.mark.parametrize(("var", "value"), BAD_ENV, ids=[f"{k}={v!r}" for k, v in BAD_ENV])
def test_from_env_refuses_a_bad_variable_naming_it(var: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        RuntimeConfig.from_env({var: value})
    message = str(info.value)
    assert var in message, f"the variable is not named: {message}"
    part = value.rpartition("=")[2].strip()  # ACTORFLOW_RETENTION may name the bad part
    assert value in message or part in message, f"the value is not named: {message}"


def test_from_env_converts_good_values() -> None:
    config = RuntimeConfig.from_env(
        {
            "ACTORFLOW_DURABILITY": " SYNC ",
            "ACTORFLOW_STEP_RETRIES": "0",
            "ACTORFLOW_MAX_RECOVERY_ATTEMPTS": "7",
            "ACTORFLOW_RECOVERY_TIMEOUT": "2m",
            "ACTORFLOW_CHECKPOINT_EVERY_STEPS": "0",
            "ACTORFLOW_CHECKPOINT_EVERY": "250ms",
            "ACTORFLOW_RETENTION": "keep=2,max_age=7d",
            "ACTORFLOW_CODE_VERSION": "v9",
        }
    )
    assert config.durability is Durability.SYNC
    assert (config.step_retries, config.max_recovery_attempts) == (0, 7)
    assert config.recovery_timeout == 120.0
    assert config.triggers.every_steps is None
    assert config.triggers.every_seconds == 0.25
    assert config.retention == RetentionPolicy(keep_last=2, max_age=7 * 86400.0)
    assert config.code_version == "v9"


def test_from_env_overrides_are_validated_like_the_constructor() -> None:
    assert RuntimeConfig.from_env({}, durability="phase").durability is Durability.PHASE
    with pytest.raises(ConfigurationError, match="durability"):
        RuntimeConfig.from_env({}, durability="bogus")
    with pytest.raises(ConfigurationError, match="step_retries"):
        RuntimeConfig.from_env({"ACTORFLOW_STEP_RETRIES": "1"}, step_retries="x")


def test_retention_from_env_can_let_phase_ends_go() -> None:
    config = RuntimeConfig.from_env({"ACTORFLOW_RETENTION": "keep=2,phase_ends=0"})
    assert config.retention == RetentionPolicy(keep_last=2, keep_phase_ends=False)
    assert RuntimeConfig.from_env({"ACTORFLOW_RETENTION": "keep=2"}).retention == RetentionPolicy(
        keep_last=2
    )
    with pytest.raises(ConfigurationError, match="keep_phase_ends"):
        RuntimeConfig(retention=RetentionPolicy(keep_phase_ends="no"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value", ["keep=5,keep=3", "keep=5,keep_last=3", "max_bytes=1,max_total_bytes=2"]
)
def test_retention_from_env_refuses_a_key_given_twice(value: str) -> None:
    with pytest.raises(ConfigurationError, match="ACTORFLOW_RETENTION") as info:
        RuntimeConfig.from_env({"ACTORFLOW_RETENTION": value})
    assert "each key once" in str(info.value)


def test_from_env_refuses_an_unknown_log_level_by_name() -> None:
    with pytest.raises(ConfigurationError, match="ACTORFLOW_LOG_LEVEL"):
        RuntimeConfig.from_env({"ACTORFLOW_LOG_LEVEL": "verbose"})
