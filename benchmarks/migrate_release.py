"""``migrate``'s diff judged by each two-broadcast vLLM release's own lint and type
configuration, as a maintainer of that release would.

Per release, a temporary project is laid out as the repository was at the release's
tag: the wheel's ``vllm/`` (``tests/vllm_wheels.py``), and from the release's sdist
(``tests/vllm_sdists.py``) its ``pyproject.toml``, ``setup.cfg`` and ``tests/``. The
sdists do not carry the lint requirements, so the formatter pin of those releases'
``requirements-dev.txt`` (``YAPF_PIN``) is written beside them; a release without an
sdist (0.3.2, 0.4.0, 0.4.0.post1) is judged with the next release's configuration
and tests (``CONFIG_OF``, marked). Then
``migrate vllm tests`` runs and is written, and:

* *yapf*: lines the release's yapf (style from the project directory: its
  ``[tool.yapf]``, else yapf's pep8 default) would change in each rewritten file,
  and in the same files before (the baseline);
* *mypy*: plain mypy (no plugin) with the release's ``pyproject.toml`` on the
  rewritten ``vllm/`` files, before and after: errors, and errors that are new
  (same file, code and message not there before);
* *callers*: calls of a removed method in ``tests/`` before; test files updated;
  calls named in notes;
* *WorkerInput*: worker input classes defined in the migrated tree;
* *diff*: lines added/removed in ``vllm/`` by migrate, and by the hand-written
  refactor (0.5.0 -> 0.5.1 on the same files plus the new ones, an upper bound:
  the release has other changes too) where one follows the release.

Usage::

    python benchmarks/migrate_release.py [--versions 0.5.0 ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.migrate_coverage import VERSIONS, migrate_and_write  # noqa: E402
from tests.vllm_sdists import CONFIG_FILES, sdist_root  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402

#: the formatter pins of vLLM 0.3.x-0.5.0's requirements-dev.txt (not in the sdists)
YAPF_PIN = "yapf==0.32.0\ntoml==0.10.2\n"
#: the release whose sdist stands in for one that has none
CONFIG_OF = {"0.3.2": "0.3.3", "0.4.0": "0.4.1", "0.4.0.post1": "0.4.1"}
#: the release holding the hand-written refactor that follows each release
HAND = {"0.5.0": "0.5.1", "0.5.0.post1": "0.5.1"}
REMOVED = "prepare_input_tensors"
_ERROR = re.compile(r"^([^:]+):\d+: error: (.*)$")


@dataclass
class Row:
    version: str
    config_from: str
    files: int = 0
    yapf_before: int = 0
    yapf_after: int = 0
    mypy_before: int = 0
    mypy_after: int = 0
    mypy_new: list[str] | None = None
    test_calls: int = 0
    tests_updated: int = 0
    calls_named: int = 0
    worker_inputs: list[str] | None = None
    added: int = 0
    removed: int = 0
    hand_added: int | None = None
    hand_removed: int | None = None


def _yapf_lines(root: Path, text: str) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from yapf.yapflib import file_resources, yapf_api

    style = file_resources.GetDefaultStyleForDir(str(root))
    formatted, _ = yapf_api.FormatCode(text, style_config=style)
    return _diff_size(text, formatted)[0]


def _diff_size(old: str, new: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _mypy(root: Path, files: list[str]) -> set[tuple[str, str]]:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "--no-error-summary",
         "--show-error-codes", "--cache-dir", str(root / ".mypy_cache"), *files],
        cwd=root, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    found = set()
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            found.add((match.group(1), match.group(2)))
    return found


def _layout(version: str, root: Path) -> str:
    config_from = CONFIG_OF.get(version, version)
    sdist = sdist_root(config_from)
    shutil.copytree(vllm_package(version), root / "vllm")
    shutil.copytree(sdist / "tests", root / "tests")
    for name in CONFIG_FILES:
        if (sdist / name).is_file():
            shutil.copy(sdist / name, root / name)
    if not any((root / n).is_file() for n in ("requirements-dev.txt", "requirements-lint.txt")):
        (root / "requirements-dev.txt").write_text(YAPF_PIN)
    return config_from


def measure(version: str, work: Path) -> Row:
    root = work / version
    row = Row(version, _layout(version, root))
    original = {p: p.read_text() for p in root.rglob("*.py")}
    row.test_calls = sum(t.count(f".{REMOVED}(") for p, t in original.items() if "tests" in p.parts)
    outcome = migrate_and_write(version, [root / "vllm", root / "tests"])
    changed = sorted(outcome.changes)
    row.files = len(changed)
    rel = [str(p.relative_to(root)) for p in changed if p.suffix == ".py"]
    for path in changed:
        new = path.read_text()
        row.yapf_after += _yapf_lines(root, new)
        if path in original:
            row.yapf_before += _yapf_lines(root, original[path])
    row.tests_updated = sum(1 for p in changed if "tests" in p.relative_to(root).parts)
    row.calls_named = sum(1 for n in outcome.notes if n.kind == "callers")
    vllm_files = [r for r in rel if r.startswith("vllm/")]
    before_root = work / f"{version}-before"
    shutil.copytree(root, before_root, ignore=shutil.ignore_patterns(".mypy_cache"))
    for path, text in original.items():
        (before_root / path.relative_to(root)).write_text(text)
    for r in vllm_files:
        if (root / r).is_file() and Path(root / r) not in original:
            (before_root / r).unlink()
    existed = [r for r in vllm_files if (before_root / r).is_file()]
    before = _mypy(before_root, existed)
    after = _mypy(root, vllm_files)
    row.mypy_before, row.mypy_after = len(before), len(after)
    row.mypy_new = sorted(f"{f}: {m}" for f, m in after - before)
    row.worker_inputs = sorted(
        {
            f"{m.group(1)} ({p.name})"
            for p in (root / "vllm").rglob("*.py")
            for m in re.finditer(r"^class (\w*WorkerInput)\b", p.read_text(), re.MULTILINE)
        }
    )
    for path in changed:
        if "vllm" in path.relative_to(root).parts[:1]:
            a, r = _diff_size(original.get(path, ""), path.read_text())
            row.added += a
            row.removed += r
    hand = HAND.get(version)
    if hand is not None:
        hand_root = vllm_package(hand).parent
        row.hand_added = row.hand_removed = 0
        names = {str(p.relative_to(root)) for p in changed if p.parts[-2:-1] != ("tests",)}
        for name in sorted(n for n in names if n.startswith("vllm/")):
            old = original.get(root / name, "")
            new_path = hand_root / name
            a, r = _diff_size(old, new_path.read_text() if new_path.is_file() else "")
            row.hand_added += a
            row.hand_removed += r
        for extra in ("vllm/worker/model_runner_base.py",):
            if extra not in names and (hand_root / extra).is_file():
                row.hand_added += len((hand_root / extra).read_text().splitlines())
    return row


def table(rows: list[Row]) -> str:
    lines = [
        "| release | config | files | yapf lines before → after | mypy errors before → after "
        "(new) | test calls: updated / named | WorkerInput classes | diff +/- (hand 0.5.1) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        hand = "" if r.hand_added is None else f" ({r.hand_added}/{r.hand_removed})"
        config = r.config_from if r.config_from == r.version else f"{r.config_from}'s"
        lines.append(
            f"| {r.version} | {config} | {r.files} | {r.yapf_before} → {r.yapf_after} "
            f"| {r.mypy_before} → {r.mypy_after} ({len(r.mypy_new or [])}) "
            f"| {r.test_calls}: {r.tests_updated} / {r.calls_named} "
            f"| {len(r.worker_inputs or [])}: {', '.join(r.worker_inputs or [])} "
            f"| +{r.added}/-{r.removed}{hand} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="migrate-release-") as tmp:
        for version in args.versions:
            rows.append(measure(version, Path(tmp)))
            print(f"{version}: done", file=sys.stderr)
    print(table(rows))
    for r in rows:
        for error in r.mypy_new or []:
            print(f"{r.version} new mypy error: {error}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    clean = all(r.yapf_after == 0 and not r.mypy_new for r in rows)
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
