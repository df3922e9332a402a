"""open_store: which store a location names, and locations it refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.errors import ConfigurationError
from actorflow.storage import FileStore, open_store

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("location", ["ftp://host/x", "redis://localhost:6379", "mysql://db/af"])
def test_an_unknown_scheme_is_refused_not_taken_for_a_folder(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="sqlite://") as caught:
        open_store(location)
    assert caught.value.value == location
    assert list(tmp_path.iterdir()) == []


def test_a_mistyped_scheme_leaves_the_urls_password_out_of_the_error() -> None:
    location = "postgresq://ops:hunter2@db.internal/runs?password=swordfish&sslmode=require"
    with pytest.raises(ConfigurationError) as caught:
        open_store(location)
    message = str(caught.value)
    assert "hunter2" not in message
    assert "swordfish" not in message
    assert "postgresq://ops@db.internal/runs?sslmode=require" in message


def test_a_path_without_a_scheme_is_a_folder(tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs")
    assert isinstance(store, FileStore)


def test_a_file_url_is_a_folder(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/my%20runs")
    assert isinstance(store, FileStore)
    assert store.path == str(tmp_path / "my runs")
    assert isinstance(open_store(f"file://localhost{tmp_path}"), FileStore)


@pytest.mark.parametrize("location", ["file://otherhost/srv/runs", "file://"])
def test_a_file_url_of_another_host_or_no_path_is_refused(location: str) -> None:
    with pytest.raises(ConfigurationError, match="file:///absolute/path"):
        open_store(location)
