"""The demo's pure analysis over the standard library, against a bare ``ast.parse`` baseline.

    python benchmarks/demo_analysis.py [ROOT]

Prints one table: files, seconds and the ratio to parsing alone, measured in
the same run, for discovery, the default review and the strict review.
"""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

from actorflow._demo import _analysis as analysis


def parse_only(root: Path, files: list[str]) -> None:
    for rel in files:
        try:
            ast.parse((root / rel).read_bytes())
        except (SyntaxError, ValueError):
            pass


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else analysis.default_root()
    t0 = time.perf_counter()
    files = analysis.discover(root)
    discover = time.perf_counter() - t0
    t0 = time.perf_counter()
    parse_only(root, files)
    baseline = time.perf_counter() - t0
    rows = [("discover", discover), ("ast.parse only (baseline)", baseline)]
    for strict in (False, True):
        t0 = time.perf_counter()
        reports = analysis.analyse_files(root, files, strict=strict)
        rows.append((f"review ({'strict' if strict else 'default'})", time.perf_counter() - t0))
    t0 = time.perf_counter()
    areas = analysis.group_by_area(files)
    by_path = {r.path: r for r in reports}
    for area, paths in areas.items():
        analysis.score_area(area, [by_path[p] for p in paths])
    rows.append((f"score {len(areas)} areas", time.perf_counter() - t0))
    print(f"{len(files)} files under {root}")
    print(f"{'stage':<28} {'seconds':>8} {'ms/file':>8} {'x parse':>8}")
    for name, seconds in rows:
        print(
            f"{name:<28} {seconds:>8.2f} {1000 * seconds / len(files):>8.2f} "
            f"{seconds / baseline:>8.2f}"
        )


if __name__ == "__main__":
    main()
