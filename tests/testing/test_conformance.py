"""The shipped conformance suite as a third party runs it: in their own pytest project.

Each test writes a small project (a store module and a test module) and runs
pytest on it in a subprocess, with no ini file and no conftest: what
``docs/storage.md`` says is enough must be enough.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

from actorflow.testing.conformance import StoreConformance
from tests.snippets import python_blocks

if TYPE_CHECKING:
    import pytest

TIMEOUT = 300  # seconds: a bound on a hung run, far above its few seconds

THIRD_PARTY_STORE = '''
"""A third party's store (a FileStore in disguise, with a small snapshot limit)."""

from actorflow.storage import Codec, FileStore


class MyStore(FileStore):
    def __init__(self, path):
        super().__init__(path, codec=Codec(max_snapshot_bytes=1 << 20))
'''

BROKEN_STORE = '''
"""A store with a bug: reading the log from a position ignores the position."""

from actorflow.storage import MemoryStore


class MyStore(MemoryStore):
    def __init__(self, path):
        super().__init__()

    async def read_log(self, run_id, start=0):
        return await super().read_log(run_id)
'''

TEST_NAMES = sorted(n for n in dir(StoreConformance) if n.startswith("test_"))


def documented_example() -> str:
    (code,) = python_blocks("storage.md", "## Writing your own store")
    return code


def run(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, set[str]], str]:
    """Run pytest in ``pytester``'s folder; each outcome's set of ``name[loop]``, and the output."""
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "-W", "error", *args, timeout=TIMEOUT
    )
    out = result.stdout.str()
    outcomes: dict[str, set[str]] = {}
    for name, params, outcome in re.findall(r"::(test_\w+)(?:\[([^\]]*)\])? (\w+)", out):
        loops = [p for p in params.split("-") if p in ("asyncio", "trio")]
        outcomes.setdefault(outcome, set()).add(f"{name}[{loops[0]}]" if loops else name)
    return outcomes, out


def test_the_documented_example_runs_every_test_on_both_loops(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(my_package=THIRD_PARTY_STORE, test_my_store=documented_example())
    outcomes, out = run(pytester)
    assert set(outcomes) == {"PASSED"}, out
    assert outcomes["PASSED"] == {
        f"{n}[{loop}]" for n in TEST_NAMES for loop in ("asyncio", "trio")
    }
    assert len(TEST_NAMES) > 35


def test_a_store_with_a_bug_fails_the_tests_that_find_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(my_package=BROKEN_STORE, test_my_store=documented_example())
    outcomes, out = run(pytester)
    failed = {name.partition("[")[0] for name in outcomes.get("FAILED", set())}
    assert "test_append_returns_the_new_length_and_reads_back_in_order" in failed, out
    assert "test_truncate_before_keeps_absolute_positions" in failed, out
    assert "test_create_run_is_create_if_absent" not in failed


def test_a_subclass_chooses_its_loop_and_leaves_a_test_out(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(my_package=THIRD_PARTY_STORE)
    pytester.makepyfile(
        test_my_store=documented_example()
        + textwrap.dedent(
            """
            class TestOnAsyncio(TestMyStore):
                @pytest.fixture
                def anyio_backend(self):
                    return "asyncio"

                @pytest.mark.skip(reason="not supported")
                async def test_keep_per_phase(self, store):
                    pass
            """
        )
    )
    outcomes, out = run(pytester, "-k", "TestOnAsyncio")
    assert "[trio" not in out  # one loop: no test is parametrized by loop any more
    assert outcomes["SKIPPED"] == {"test_keep_per_phase"}, out
    assert outcomes["PASSED"] == set(TEST_NAMES) - {"test_keep_per_phase"}


def test_a_subclass_without_a_store_fixture_is_told_what_to_define(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_my_store="""
        from actorflow.testing.conformance import StoreConformance

        class TestMyStore(StoreConformance):
            pass
        """
    )
    outcomes, out = run(pytester, "-k", "test_create_run_is_create_if_absent")
    assert set(outcomes) == {"ERROR"}, out
    assert "TestMyStore needs a `store` fixture" in out


def test_the_core_install_never_imports_pytest() -> None:
    code = """
import sys
sys.modules["pytest"] = None  # as if it were not installed
import actorflow, actorflow.testing, actorflow.storage
try:
    import actorflow.testing.conformance
except ModuleNotFoundError as exc:
    print(exc)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'actorflow[testing]'" in proc.stdout
