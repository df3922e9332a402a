"""Encryption keys from ``ACTORFLOW_KEYS`` or ``ACTORFLOW_KEY_FILE``, for stores opened by name."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow import Orchestrator, RunContext, Runtime
from actorflow.errors import ConfigurationError, EncryptionKeyMissingError
from actorflow.storage import Codec, FileStore, open_store
from actorflow.storage._keys import keys_from_env, parse_keys

if TYPE_CHECKING:
    from pathlib import Path

K1, K2 = bytes(range(32)), bytes(range(16))


def b64(key: bytes, *, urlsafe: bool = False, pad: bool = True) -> str:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(key).decode()
    return text if pad else text.rstrip("=")


class TestParsing:
    def test_entries_by_comma_or_line_in_either_base64_alphabet(self) -> None:
        text = f"# keys\nk1:{b64(K1)}, k2:{b64(K2, urlsafe=True, pad=False)}\n\n"
        assert parse_keys(text, source="x") == {"k1": K1, "k2": K2}

    @pytest.mark.parametrize(
        "text", ["k1", f":{b64(K1)}", "k1:not base64!", f"k1:{b64(K1[:20])}", "k1:"]
    )
    def test_a_bad_entry_names_its_source_and_never_the_key(self, text: str) -> None:
        with pytest.raises(ConfigurationError, match="ACTORFLOW_KEYS") as info:
            parse_keys(text, source="ACTORFLOW_KEYS")
        assert "<redacted>" in str(info.value)
        secret = text.partition(":")[2]
        assert not secret or secret not in str(info.value)

    def test_nothing_configured_is_no_key(self) -> None:
        assert keys_from_env({}) == ({}, None)

    def test_new_data_uses_the_key_id_named_or_the_last_listed(self) -> None:
        both = f"k1:{b64(K1)},k2:{b64(K2)}"
        assert keys_from_env({"ACTORFLOW_KEYS": both}) == ({"k1": K1, "k2": K2}, "k2")
        chosen = {"ACTORFLOW_KEYS": both, "ACTORFLOW_KEY_ID": "k1"}
        assert keys_from_env(chosen)[1] == "k1"
        with pytest.raises(ConfigurationError, match="ACTORFLOW_KEY_ID"):
            keys_from_env({"ACTORFLOW_KEYS": both, "ACTORFLOW_KEY_ID": "k3"})

    def test_a_key_file_replaces_the_variable_naming_one(self, tmp_path: Path) -> None:
        given, named = tmp_path / "given", tmp_path / "named"
        given.write_text(f"k1:{b64(K1)}\n")
        named.write_text(f"k2:{b64(K2)}\n")
        env = {"ACTORFLOW_KEY_FILE": str(named)}
        assert keys_from_env(env) == ({"k2": K2}, "k2")
        assert keys_from_env(env, key_file=given) == ({"k1": K1}, "k1")

    def test_keys_inline_and_in_a_file_at_once_are_refused(self, tmp_path: Path) -> None:
        named = tmp_path / "keys"
        named.write_text(f"k2:{b64(K2)}\n")
        env = {"ACTORFLOW_KEYS": f"k1:{b64(K1)}", "ACTORFLOW_KEY_FILE": str(named)}
        with pytest.raises(ConfigurationError, match="unset when ACTORFLOW_KEY_FILE"):
            keys_from_env(env)

    def test_an_unreadable_or_empty_key_file_says_so(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError, match="a readable key file"):
            keys_from_env({"ACTORFLOW_KEY_FILE": str(tmp_path / "nope")})
        (tmp_path / "empty").write_text("# nothing yet\n")
        with pytest.raises(ConfigurationError, match="entries <key id>"):
            keys_from_env({"ACTORFLOW_KEY_FILE": str(tmp_path / "empty")})


class Hello(Orchestrator):
    __actorflow_name__ = "tests.keys.Hello"

    async def run(self, ctx: RunContext, name: str) -> str:
        return f"hello {name}"


class TestStoresOpenedByName:
    async def test_open_store_and_a_runtime_encrypt_with_the_environment_s_keys(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("ACTORFLOW_KEYS", f"k1:{b64(K1)}")
        monkeypatch.delenv("ACTORFLOW_KEY_FILE", raising=False)
        path = str(tmp_path / "store")
        async with Runtime(store=path) as runtime:
            assert await runtime.run(Hello, "you", run_id="r1") == "hello you"
        store = open_store(path)
        try:
            assert (await store.read_run("r1")).status == "completed"
        finally:
            await store.aclose()
        async with FileStore(path) as unkeyed:  # built by hand: no environment
            with pytest.raises(EncryptionKeyMissingError, match="ACTORFLOW_KEYS"):
                await unkeyed.read_run("r1")
        async with FileStore(path, codec=Codec.from_env()) as keyed:
            assert (await keyed.read_run("r1")).run_id == "r1"


class TestDuplicatesAndModes:
    def test_a_key_id_listed_twice_is_refused_naming_the_id_not_the_keys(self) -> None:
        text = f"k1:{b64(K1)},k1:{b64(K2)}"
        with pytest.raises(ConfigurationError, match="'k1' listed twice") as info:
            parse_keys(text, source="ACTORFLOW_KEYS")
        assert b64(K1) not in str(info.value)
        assert b64(K2) not in str(info.value)

    def test_a_key_file_others_may_read_is_used_with_a_warning(self, tmp_path: Path) -> None:
        file = tmp_path / "keys"
        file.write_text(f"k1:{b64(K1)}\n")
        file.chmod(0o644)
        with capture_logs() as logs:
            assert keys_from_env({}, key_file=file) == ({"k1": K1}, "k1")
        [warning] = [e for e in logs if e["event"] == "key_file_readable_by_others"]
        assert warning["log_level"] == "warning"
        assert warning["mode"] == "0o644"
        file.chmod(0o600)
        with capture_logs() as logs:
            keys_from_env({}, key_file=file)
        assert not [e for e in logs if e["event"] == "key_file_readable_by_others"]
