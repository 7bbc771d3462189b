"""``migrate``'s diff judged by each two-broadcast vLLM release's own lint and type
configuration and tools, as a maintainer of that release would.

Per release, a temporary project is laid out as the repository was at the release's
tag: the wheel's ``vllm/`` (``tests/vllm_wheels.py``), and the tag's
``pyproject.toml``, ``setup.cfg``, lint requirements and ``tests/``, read from a git
repository holding vLLM's tags under ``--mirror`` (``benchmarks/release_config.py``;
a tag counts only when its ``vllm/worker/`` is the wheel's). The yapf, toml and mypy
pins of those requirements are installed into a cached tool environment and do the
judging. Without such a repository the release's sdist gives the configuration and
``tests/`` (``tests/vllm_sdists.py``; a release without one borrows the next
release's, ``CONFIG_OF``), the formatter pin ``YAPF_PIN`` of those releases'
``requirements-dev.txt`` stands in for the lint requirements, and mypy is this
environment's. Then ``migrate vllm tests`` runs and is written, and:

* *yapf*: lines the release's yapf (style from the project directory: its
  ``[tool.yapf]``, else yapf's pep8 default) would change in each rewritten file,
  and in the same files before (the baseline);
* *mypy*: plain mypy (no plugin) with the release's configuration on the rewritten
  ``vllm/`` files, as its ``format.sh`` runs it (``--config-file pyproject.toml``),
  before and after: errors, and errors that are new (same file, code and message not
  there before);
* *callers*: calls of a removed method in ``tests/`` before; test files updated;
  calls named in notes;
* *WorkerInput*: worker input classes defined in the migrated tree;
* *diff*: lines added/removed in ``vllm/`` by migrate, and by the hand-written
  refactor (0.5.0 -> 0.5.1 on the same files plus the new ones, an upper bound:
  the release has other changes too) where one follows the release.

``--stripped`` measures each release a second time with every tool configuration
file (:data:`STRIPPED`) removed from the tree while ``migrate`` runs (a plain copy:
no ``pyproject.toml``, no ``.git``, no pins; the formatter and the line length are
inferred from the files) and put back for the judging, and prints that table too,
with one more column, *plain mypy*: this environment's mypy with no configuration
file, its defaults plus ``--check-untyped-defs`` (what ``migrate`` judges a plain
copy by), on the rewritten ``vllm/`` files before and after, errors in those files
only (the imports it follows are reported too), new by file, code and message as
``migrate`` compares them (``codemods.framework.typecheck.same_message``: the class a called
method is defined in aside, since the migration moves methods into generated bases).

Usage::

    python benchmarks/migrate_release.py [--versions 0.5.0 ...] [--mirror DIR]
                                         [--stripped] [--json out.json]
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
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import release_config  # noqa: E402
from benchmarks.migrate_coverage import VERSIONS, migrate_and_write  # noqa: E402
from codemods.framework.typecheck import same_message  # noqa: E402
from tests.vllm_sdists import CONFIG_FILES, sdist_root  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402

#: the formatter pins of vLLM 0.3.x-0.5.0's requirements-dev.txt (not in the sdists)
YAPF_PIN = "yapf==0.32.0\ntoml==0.10.2\n"
#: the release whose sdist stands in for one that has none
CONFIG_OF = {"0.3.2": "0.3.3", "0.4.0": "0.4.1", "0.4.0.post1": "0.4.1"}
#: the release holding the hand-written refactor that follows each release
HAND = {"0.5.0": "0.5.1", "0.5.0.post1": "0.5.1"}
REMOVED = "prepare_input_tensors"
#: the tool configuration files removed in the ``--stripped`` measurement
STRIPPED = (
    "pyproject.toml",
    "setup.cfg",
    "mypy.ini",
    ".style.yapf",
    "tox.ini",
    ".flake8",
    "ruff.toml",
    ".ruff.toml",
    "format.sh",
    "requirements-lint.txt",
    "requirements-dev.txt",
)
_ERROR = re.compile(r"^([^:]+):\d+: error: (.*)$")


@dataclass
class Row:
    version: str
    config_from: str
    tools: str = ""
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
    #: lines over 80 columns migrate wrote into test files
    long_test_lines: int = 0
    #: ``--stripped``: mypy's defaults plus ``check_untyped_defs`` (what ``migrate``
    #: judges a plain copy by), this environment's mypy, in the rewritten files
    plain_before: int | None = None
    plain_after: int | None = None
    plain_new: list[str] | None = None
    plain_new_exact: int | None = None


#: run in the tool environment: the lines yapf would change in each file, with the
#: style found from the project directory (its ``[tool.yapf]``, else pep8)
_YAPF_COUNT = """
import difflib, json, sys, warnings
warnings.simplefilter("ignore")
from yapf.yapflib import file_resources, yapf_api
root, files = sys.argv[1], sys.argv[2:]
style = file_resources.GetDefaultStyleForDir(root)
counts = {}
for name in files:
    text = open(name, encoding="utf-8").read()
    formatted, _ = yapf_api.FormatCode(text, style_config=style)
    diff = difflib.unified_diff(text.splitlines(), formatted.splitlines(), lineterm="", n=0)
    counts[name] = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
print(json.dumps(counts))
"""


def _yapf_lines(python: Path, root: Path, files: list[Path]) -> int:
    if not files:
        return 0
    proc = subprocess.run(
        [str(python), "-c", _YAPF_COUNT, str(root), *map(str, files)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"migrate_release: yapf failed: {proc.stderr.strip()[-400:]}")
    return sum(json.loads(proc.stdout).values())


def _diff_size(old: str, new: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _mypy(python: Path, root: Path, files: list[str], plain: bool = False) -> set[tuple[str, str]]:
    """(file, message) of each error in ``files``; ``plain``: no configuration file,
    mypy's defaults plus ``check_untyped_defs``."""
    config = (
        ["--config-file", "", "--check-untyped-defs"]
        if plain
        else ["--config-file", "pyproject.toml"]
    )
    proc = subprocess.run(
        [str(python), "-m", "mypy", *config, "--no-error-summary", "--show-error-codes",
         "--hide-error-context", "--cache-dir", str(root / ".mypy_cache"), *files],
        cwd=root, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    found = set()
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match and (not plain or match.group(1) in files):
            found.add((match.group(1), match.group(2)))
    return found


def _layout(version: str, root: Path, mirror: Path | None) -> tuple[str, Path, Path]:
    """Lay the project out; where its configuration came from, and the Pythons that
    run the release's yapf and mypy."""
    package = vllm_package(version)
    shutil.copytree(package, root / "vllm")
    tagged = release_config.find_tag(version, package, mirror) if mirror else None
    if tagged is not None:
        release_config.lay_out(tagged, root)
        source = f"tag {tagged.label()}"
    else:
        source = CONFIG_OF.get(version, version)
        sdist = sdist_root(source)
        shutil.copytree(sdist / "tests", root / "tests")
        for name in CONFIG_FILES:
            if (sdist / name).is_file():
                shutil.copy(sdist / name, root / name)
        if not any((root / n).is_file() for n in ("requirements-dev.txt", "requirements-lint.txt")):
            (root / "requirements-dev.txt").write_text(YAPF_PIN)
        source = f"sdist {source}"
    pinned = release_config.pins(root)
    yapf = release_config.tool_python({k: v for k, v in pinned.items() if k != "mypy"})
    mypy = release_config.tool_python({"mypy": pinned["mypy"]}) if "mypy" in pinned else None
    return source, yapf, mypy or Path(sys.executable)


def measure(version: str, work: Path, mirror: Path | None, stripped: bool = False) -> Row:
    root = work / (f"{version}-stripped" if stripped else version)
    source, yapf, mypy = _layout(version, root, mirror)
    row = Row(version, source + (", stripped" if stripped else ""), _tool_versions(yapf, mypy))
    original = {p: p.read_text() for p in root.rglob("*.py")}
    row.test_calls = sum(t.count(f".{REMOVED}(") for p, t in original.items() if "tests" in p.parts)
    kept = {n: (root / n).read_bytes() for n in STRIPPED if stripped and (root / n).is_file()}
    for name in kept:
        (root / name).unlink()
    outcome = migrate_and_write(version, [root / "vllm", root / "tests"])
    for name, data in kept.items():  # judged by the release's own configuration
        (root / name).write_bytes(data)
    changed = sorted(outcome.changes)
    row.files = len(changed)
    rel = [str(p.relative_to(root)) for p in changed if p.suffix == ".py"]
    row.tests_updated = sum(1 for p in changed if "tests" in p.relative_to(root).parts)
    row.calls_named = sum(1 for r in outcome.refusals if r.code == "MIG112")
    row.long_test_lines = sum(
        1
        for p in changed
        if "tests" in p.relative_to(root).parts
        for line in p.read_text().splitlines()
        if len(line) > 80 and line not in original.get(p, "").splitlines()
    )
    vllm_files = [r for r in rel if r.startswith("vllm/")]
    before_root = work / f"{root.name}-before"
    shutil.copytree(root, before_root, ignore=shutil.ignore_patterns(".mypy_cache"))
    for path, text in original.items():
        (before_root / path.relative_to(root)).write_text(text)
    for name in vllm_files:
        if (root / name).is_file() and Path(root / name) not in original:
            (before_root / name).unlink()
    existed = [name for name in vllm_files if (before_root / name).is_file()]
    row.yapf_after = _yapf_lines(yapf, root, changed)
    row.yapf_before = _yapf_lines(
        yapf, before_root, [before_root / p.relative_to(root) for p in changed if p in original]
    )
    before = _mypy(mypy, before_root, existed)
    after = _mypy(mypy, root, vllm_files)
    row.mypy_before, row.mypy_after = len(before), len(after)
    # a created module importing what this environment lacks, as the old files do
    # (torch), is the environment's error, not the rewrite's (as migrate's own check)
    missing = {m for f, m in before if m.endswith("[import]") or "[import-" in m}
    row.mypy_new = sorted(
        f"{f}: {m}" for f, m in after - before if not (f not in existed and m in missing)
    )
    if stripped:  # followed imports are reported too: only the rewritten files count
        plain_before = _mypy(Path(sys.executable), before_root, existed, plain=True)
        plain_after = _mypy(Path(sys.executable), root, vllm_files, plain=True)
        row.plain_before, row.plain_after = len(plain_before), len(plain_after)
        # by exact text, and as migrate compares them
        exact = {
            (f, m) for f, m in plain_after - plain_before if not (f not in existed and m in missing)
        }
        row.plain_new_exact = len(exact)
        old_messages = {(f, same_message(m)) for f, m in plain_before}
        row.plain_new = sorted(
            f"{f}: {m}" for f, m in exact if (f, same_message(m)) not in old_messages
        )
    row.worker_inputs = sorted(
        {
            f"{m.group(1)} ({p.name})"
            for p in (root / "vllm").rglob("*.py")
            for m in re.finditer(r"^class (\w*WorkerInput)\b", p.read_text(), re.MULTILINE)
        }
    )
    for path in changed:
        if "vllm" in path.relative_to(root).parts[:1]:
            added, removed = _diff_size(original.get(path, ""), path.read_text())
            row.added += added
            row.removed += removed
    hand = HAND.get(version)
    if hand is not None:
        hand_root = vllm_package(hand).parent
        row.hand_added = row.hand_removed = 0
        names = {str(p.relative_to(root)) for p in changed if p.parts[-2:-1] != ("tests",)}
        for name in sorted(n for n in names if n.startswith("vllm/")):
            old = original.get(root / name, "")
            new_path = hand_root / name
            added, removed = _diff_size(old, new_path.read_text() if new_path.is_file() else "")
            row.hand_added += added
            row.hand_removed += removed
        for extra in ("vllm/worker/model_runner_base.py",):
            if extra not in names and (hand_root / extra).is_file():
                row.hand_added += len((hand_root / extra).read_text().splitlines())
    return row


def _tool_versions(yapf: Path, mypy: Path) -> str:
    found = []
    for python, module in ((yapf, "yapf"), (mypy, "mypy")):
        proc = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; print(m.version({module!r}))"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        found.append(f"{module} {proc.stdout.strip() or '?'}")
    return ", ".join(found)


def table(rows: list[Row]) -> str:
    lines = [
        "| release | config | tools | files | yapf lines before → after | mypy errors before → after "
        "(new) | test calls: files updated / named (new lines > 80) | WorkerInput classes "
        "| diff +/- (hand 0.5.1) | plain mypy before → after (new; by exact text) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        hand = "" if r.hand_added is None else f" ({r.hand_added}/{r.hand_removed})"
        plain = (
            "-"
            if r.plain_new is None
            else f"{r.plain_before} → {r.plain_after} ({len(r.plain_new)}; {r.plain_new_exact})"
        )
        lines.append(
            f"| {r.version} | {r.config_from} | {r.tools} | {r.files} | {r.yapf_before} → {r.yapf_after} "
            f"| {r.mypy_before} → {r.mypy_after} ({len(r.mypy_new or [])}) "
            f"| {r.test_calls}: {r.tests_updated} / {r.calls_named} ({r.long_test_lines}) "
            f"| {len(r.worker_inputs or [])}: {', '.join(r.worker_inputs or [])} "
            f"| +{r.added}/-{r.removed}{hand} "
            f"| {plain} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument(
        "--mirror", type=Path, default=Path("/work/.mirror"),
        help="git repositories holding vLLM's tags (<owner>+<name>/repo); none: the sdists",
    )  # fmt: skip
    parser.add_argument(
        "--stripped", action="store_true",
        help="also measure each release with every tool configuration file removed",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    bare: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="migrate-release-") as tmp:
        for version in args.versions:
            mirror = args.mirror if args.mirror.is_dir() else None
            rows.append(measure(version, Path(tmp), mirror))
            if args.stripped:
                bare.append(measure(version, Path(tmp), mirror, stripped=True))
            print(f"{version}: done", file=sys.stderr)
    print(table(rows))
    if bare:
        print("\nevery tool configuration file removed while migrate runs:\n")
        print(table(bare))
    for r in rows + bare:
        for error in r.mypy_new or []:
            print(f"{r.version} ({r.config_from}) new mypy error: {error}")
        for error in r.plain_new or []:
            print(f"{r.version} ({r.config_from}) new plain-mypy message: {error}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows + bare], indent=2))
    clean = all(r.yapf_after == 0 and not r.mypy_new for r in rows + bare)
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
