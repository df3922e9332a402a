"""The demo's pure review functions: discovery, per-file metrics, risky calls, scoring."""

from __future__ import annotations

import gc
import sys
import textwrap
import threading
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actorflow._demo._analysis import (
    FileReport,
    RiskyCall,
    analyse_file,
    analyse_files,
    area_of,
    default_root,
    discover,
    group_by_area,
    score_area,
)

if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType


def write(root: Path, rel: str, source: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, str):
        path.write_text(textwrap.dedent(source))
    else:
        path.write_bytes(source)


SAMPLE = '''\
"""A module with a docstring."""
import os
import subprocess as sp
from pickle import loads as unpickle
import yaml


def documented(x):
    """Has one."""
    if x and x > 1 or x < -1:
        for i in range(x):
            while i:
                i -= 1
    return [y for y in range(3) if y]


def undocumented():
    eval("1")
    os.system("ls")
    sp.run("ls", shell=True)
    sp.run(["ls"])
    unpickle(b"")
    yaml.load("a")
    yaml.load("a", Loader=yaml.SafeLoader)


def _private():
    compile("1", "<s>", "eval")
    with open("f") as f:
        return f


class Thing:
    def method(self):
        try:
            pass
        except ValueError:
            pass
'''


class TestDiscover:
    def test_finds_python_files_sorted_and_relative(self, tmp_path: Path) -> None:
        write(tmp_path, "b.py", "")
        write(tmp_path, "pkg/a.py", "")
        write(tmp_path, "pkg/data.txt", "")
        assert discover(tmp_path) == ["b.py", "pkg/a.py"]

    def test_skips_installed_packages_caches_hidden_and_venvs(self, tmp_path: Path) -> None:
        write(tmp_path, "keep.py", "")
        for skipped in (
            "site-packages/x.py",
            "dist-packages/x.py",
            "__pycache__/x.py",
            "foo-1.0.dist-info/x.py",
            "foo.egg-info/x.py",
            ".git/x.py",
            "venv/lib/x.py",
        ):
            write(tmp_path, skipped, "")
        write(tmp_path, "venv/pyvenv.cfg", "")
        assert discover(tmp_path) == ["keep.py"]

    def test_default_is_the_standard_library_without_site_packages(self) -> None:
        files = discover()
        assert len(files) > 500
        assert "os.py" in files
        assert not any("site-packages" in f or "dist-packages" in f for f in files)
        assert (default_root() / "os.py").is_file()

    def test_a_missing_folder_is_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(NotADirectoryError, match="is not a folder"):
            discover(tmp_path / "nope")


class TestAnalyseFile:
    def test_counts_functions_classes_lines_and_complexity(self, tmp_path: Path) -> None:
        write(tmp_path, "m.py", SAMPLE)
        r = analyse_file(tmp_path, "m.py")
        assert (r.functions, r.classes, r.lines) == (4, 1, SAMPLE.count("\n"))
        # documented: 1 + if + 2 extra bool operands + for + while + comprehension if
        assert (r.most_complex, r.max_complexity) == ("documented", 7)
        assert r.complexity == 7 + 1 + 1 + 2  # + undocumented + _private + method(except)
        assert r.error is None
        assert r.area == "<top>"

    def test_missing_docstrings_skip_private_names(self, tmp_path: Path) -> None:
        write(tmp_path, "m.py", SAMPLE)
        r = analyse_file(tmp_path, "m.py")
        # module, documented, undocumented, Thing, method: 3 lack one; _private not counted
        assert (r.documentable, r.missing_docstrings) == (5, 3)

    def test_finds_risky_calls_through_import_aliases(self, tmp_path: Path) -> None:
        write(tmp_path, "m.py", SAMPLE)
        calls = [(c.call, c.line) for c in analyse_file(tmp_path, "m.py").risky]
        assert calls == [
            ("eval", 18),
            ("os.system", 19),
            ("subprocess.run", 20),
            ("pickle.loads", 22),
            ("yaml.load", 23),
        ]

    def test_strict_review_finds_more(self, tmp_path: Path) -> None:
        write(tmp_path, "m.py", SAMPLE)
        loose = analyse_file(tmp_path, "m.py")
        strict = analyse_file(tmp_path, "m.py", strict=True)
        assert strict.strict
        assert "compile" in {c.call for c in strict.risky}
        assert len(strict.risky) > len(loose.risky)
        assert strict.missing_docstrings == loose.missing_docstrings + 1  # _private
        assert strict.complexity > loose.complexity  # with, comprehension

    @pytest.mark.parametrize(
        "source",
        [b"def broken(:\n", b"x = 1\x00\n", b"# -*- coding: nope -*-\nx = 1\n", b"\xff\xfe\xfa"],
        ids=["syntax", "null-byte", "bad-encoding", "bad-bytes"],
    )
    def test_a_file_that_does_not_parse_gets_an_error_report(
        self, tmp_path: Path, source: bytes
    ) -> None:
        write(tmp_path, "pkg/sub/deep/bad.py", source)
        r = analyse_file(tmp_path, "pkg/sub/deep/bad.py")
        assert r.error is not None
        assert r.area == "pkg/sub"
        assert r.functions == 0

    def test_a_missing_file_gets_an_error_report(self, tmp_path: Path) -> None:
        r = analyse_file(tmp_path, "gone.py")
        assert r.error is not None
        assert r.error.startswith("FileNotFoundError")

    def test_analyse_files_keeps_order(self, tmp_path: Path) -> None:
        write(tmp_path, "a.py", "x = 1\n")
        write(tmp_path, "b.py", "def f():\n    pass\n")
        assert [r.path for r in analyse_files(tmp_path, ["b.py", "a.py"])] == ["b.py", "a.py"]


def test_areas_are_folders_two_levels_deep() -> None:
    assert area_of("os.py") == "<top>"
    assert area_of("email/mime/text.py") == "email/mime"
    assert area_of("test/a/b/c.py") == "test/a"
    assert group_by_area(["x/b.py", "a.py", "x/a.py"]) == {
        "<top>": ["a.py"],
        "x": ["x/b.py", "x/a.py"],
    }


class TestScoreArea:
    def test_a_clean_area_scores_full_confidence(self) -> None:
        clean = FileReport(path="a/x.py", area="a", lines=100, documentable=3, functions=2)
        score = score_area("a", [clean])
        assert score.confidence == 1.0
        assert score.rationale == "no risky calls, documented, simple"

    def test_risky_calls_errors_and_missing_docstrings_lower_it_and_are_named(self) -> None:
        bad = FileReport(
            path="a/x.py",
            area="a",
            lines=200,
            documentable=10,
            missing_docstrings=10,
            max_complexity=30,
            risky=(RiskyCall(3, "eval", "evaluates"),),
        )
        broken = FileReport(path="a/y.py", area="a", error="SyntaxError: x")
        score = score_area("a", [bad, broken])
        assert score.confidence < 0.5
        assert "1 risky call(s)" in score.rationale
        assert "10/10 definitions lack docstrings" in score.rationale
        assert (score.files, score.risky_calls, score.max_complexity) == (2, 1, 30)

    def test_an_empty_area_is_clean(self) -> None:
        assert score_area("empty", []).confidence == 1.0

    def test_a_small_finding_is_named_not_called_clean(self) -> None:
        # one risky call in a large area costs little confidence, but it costs some
        big = FileReport(
            path="a/x.py", area="a", lines=500_000, risky=(RiskyCall(3, "eval", "evaluates"),)
        )
        score = score_area("a", [big])
        assert score.confidence < 1.0
        assert "no risky calls" not in score.rationale
        assert "1 risky call(s)" in score.rationale

    @given(
        st.lists(
            st.builds(
                FileReport,
                path=st.just("a/x.py"),
                area=st.just("a"),
                lines=st.integers(0, 10_000),
                documentable=st.integers(0, 50),
                missing_docstrings=st.integers(0, 50),
                max_complexity=st.integers(0, 100),
                risky=st.lists(st.builds(RiskyCall, st.integers(1), st.text(), st.text())).map(
                    tuple
                ),
                error=st.none() | st.text(),
            ),
            max_size=8,
        )
    )
    def test_confidence_stays_between_zero_and_one(self, reports: list[FileReport]) -> None:
        assert 0.0 <= score_area("a", reports).confidence <= 1.0

    @given(
        st.lists(
            st.builds(
                FileReport,
                path=st.just("a/x.py"),
                area=st.just("a"),
                lines=st.integers(0, 1_000_000),
                documentable=st.integers(0, 50),
                missing_docstrings=st.integers(0, 1),
                max_complexity=st.integers(0, 100),
                risky=st.lists(
                    st.builds(RiskyCall, st.integers(1), st.text(), st.text()), max_size=1
                ).map(tuple),
            ),
            max_size=8,
        )
    )
    def test_the_rationale_calls_an_area_clean_only_at_full_confidence(
        self, reports: list[FileReport]
    ) -> None:
        score = score_area("a", reports)
        clean = score.rationale == "no risky calls, documented, simple"
        assert clean == (score.confidence == 1.0), score


def _inside_ast_parse() -> bool:
    """Whether the calling thread is inside ``ast.parse`` (a gc callback runs there)."""
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "parse" and frame.f_code.co_filename.endswith("ast.py"):
            return True
        frame = frame.f_back
    return False


def test_parses_in_threads_never_trip_the_shared_ast_depth(tmp_path: Path) -> None:
    """Two reviewers parsing at once, one paused by a collection mid-parse (as when
    Ctrl-C unwinds the runtime and finalizers run): CPython 3.11's AST constructor
    shares its depth counter between threads, so without turns one parse raised
    SystemError "recursion depth mismatch" and the reviewer actor crashed."""
    body = "\n".join(
        f"def f{i}(x):\n    if x:\n        return [y for y in range(x) if y]\n    return {i}\n"
        for i in range(300)
    )
    write(tmp_path, "big.py", body)
    expected = analyse_file(tmp_path, "big.py")
    b_paused, b_release, b_done = threading.Event(), threading.Event(), threading.Event()
    paused: set[str] = set()
    results: dict[str, FileReport | BaseException] = {}

    def on_collect(phase: str, info: dict[str, int]) -> None:
        name = threading.current_thread().name
        if phase != "start" or name in paused or not _inside_ast_parse():
            return
        paused.add(name)
        if name == "B":
            b_paused.set()
            # Unserialised, A parses now and releases us from inside its own parse;
            # serialised, A waits for our turn to end, so this wait runs out.
            b_release.wait(2)
        elif name == "A":
            b_release.set()
            b_done.wait(10)

    def review(name: str) -> None:
        if name == "A":
            b_paused.wait(10)
        try:
            results[name] = analyse_file(tmp_path, "big.py")
        except BaseException as exc:  # the test reports what escaped
            results[name] = exc
        finally:
            if name == "B":
                b_done.set()

    threshold = gc.get_threshold()
    gc.set_threshold(50)
    gc.callbacks.append(on_collect)
    try:
        threads = [threading.Thread(target=review, args=(n,), name=n) for n in "BA"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        gc.callbacks.remove(on_collect)
        gc.set_threshold(*threshold)
    assert b_paused.is_set(), "the collection never paused B inside ast.parse"
    assert results == {"A": expected, "B": expected}
