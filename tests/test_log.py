"""actorflow's logging: quiet by default, configurable, secrets redacted."""

from __future__ import annotations

import pytest
import structlog

from actorflow import _log
from actorflow.errors import ConfigurationError


def test_events_below_the_level_are_dropped_and_secrets_are_redacted() -> None:
    logger = _log.get_logger("actorflow.test")
    previous = _log.level()
    try:
        _log.configure_logging("info")
        with structlog.testing.capture_logs() as logs:
            logger.debug("hidden")
            logger.info("shown", api_key="abc", tokens=12, aws_secret="x", password="p")
        assert [e["event"] for e in logs] == ["shown"]
        assert logs[0]["api_key"] == "[redacted]"
        assert logs[0]["aws_secret"] == "[redacted]"
        assert logs[0]["password"] == "[redacted]"
        assert logs[0]["tokens"] == 12, "a token count is not a secret"
    finally:
        _log.configure_logging(previous)


def test_an_unknown_level_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="log level"):
        _log.configure_logging("loud")


@pytest.mark.parametrize("value", ["verbose", "warn", ""])
def test_an_unknown_level_in_the_environment_is_refused_by_name(value: str) -> None:
    with pytest.raises(ConfigurationError, match="ACTORFLOW_LOG_LEVEL"):
        _log.env_level({"ACTORFLOW_LOG_LEVEL": value})
    assert _log.env_level({"ACTORFLOW_LOG_LEVEL": " Info "}) == 20
    assert _log.env_level({}) is None
