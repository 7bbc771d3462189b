"""Coverage of ``runnercheck migrate`` on the two-broadcast vLLM releases.

For every release (the wheels' ``vllm/`` package, downloaded once and cached, see
``tests/vllm_wheels.py``), on a fresh copy:

* *runner files*: the files holding a runner class of a worker/runner group with a
  paired broadcast (the groups ``migrate`` plans, the pairs ``check`` flags RC106);
* *migrated*: those ``migrate`` rewrote; *refused*: those left alone, with the codes;
* *compiles*: every file of the migrated tree compiles;
* *RC106 after*: ``check`` on the migrated tree finds no paired broadcast;
* *second run*: ``migrate`` on the migrated tree changes nothing;
* *plugin* (``--plugin``): mypy with the plugin on the migrated ``vllm/worker``
  reports no plugin error that it did not report on the original (``+0``), else the
  number of new ones.

Usage::

    python benchmarks/migrate_coverage.py [--versions 0.4.1 0.5.0] [--plugin] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codemods import apply  # noqa: E402
from codemods.facts.groups import find_groups  # noqa: E402
from codemods.framework.pipeline import MERGE, MigrateResult  # noqa: E402
from runnercheck import catalog  # noqa: E402
from runnercheck.analysis.extract import extract_source  # noqa: E402
from runnercheck.analysis.prefilter import select_sources  # noqa: E402
from runnercheck.analysis.project import Project  # noqa: E402
from runnercheck.check import check_paths  # noqa: E402
from runnercheck.config import Config  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402

VERSIONS = (
    "0.3.0",
    "0.3.1",
    "0.3.2",
    "0.3.3",
    "0.4.0",
    "0.4.0.post1",
    "0.4.1",
    "0.4.2",
    "0.4.3",
    "0.5.0",
    "0.5.0.post1",
)
MYPY_INI = """\
[mypy]
plugins = mypy_plugin
ignore_missing_imports = True
follow_imports = silent

[mypy-torch.*]
follow_imports = skip
"""
PLUGIN_CODES = {rule.name for rule in catalog.for_tool("mypy")}


@dataclass
class Coverage:
    version: str
    runner_files: list[str] = field(default_factory=list)
    migrated: list[str] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)
    files_changed: int = 0
    compiles: bool = True
    rc106_before: int = 0
    rc106_after: int = 0
    second_run_changes: int = 0
    #: new plugin errors on the migrated worker/ (None: not measured)
    plugin_new: int | None = None


def paired_runner_files(root: Path) -> dict[Path, set[str]]:
    """File -> the runner classes of groups with a paired broadcast in that file."""
    config = Config()
    contract = config.contract()
    read = {p: p.read_bytes() for p in sorted(root.rglob("*.py"))}
    facts = [
        extract_source(read[p], str(p), contract, names=True)
        for p in select_sources(read, contract, runners=True)
    ]
    groups, _notes = find_groups(Project([f for f in facts if f.syntax_error is None], contract))
    out: dict[Path, set[str]] = {}
    for group in groups:
        if group.refusal is not None and group.refusal.code == "MIG104" and not group.workers:
            continue  # a runner no worker drives: not a pair
        for ref in group.runners:
            out.setdefault(ref.path, set()).add(ref.name)
    return out


def plugin_errors(root: Path) -> set[str]:
    (root / "mypy.ini").write_text(MYPY_INI)
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file", str(root / "mypy.ini"),
            "--cache-dir", str(root / ".mypy_cache"), "--show-error-codes", "vllm/worker",
        ],
        cwd=root, capture_output=True, text=True, timeout=900,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if "runnercheck mypy plugin: error" in proc.stderr or proc.returncode not in (0, 1):
        raise RuntimeError(f"mypy failed on {root}: {proc.stderr[-500:]}")
    return {
        line.split(":", 2)[0] + ":" + line.rsplit("[", 1)[1]
        for line in proc.stdout.splitlines()
        if any(line.endswith(f"[{code}]") for code in PLUGIN_CODES)
    }


def migrate_and_write(version: str, paths: list[Path]) -> MigrateResult:
    outcome = apply(paths, select=(MERGE,))
    unwritten = [r for r in outcome.refusals if r.kind == "write"]
    if unwritten:
        raise SystemExit(f"{version}: writing the migrated tree failed: {unwritten[0]}")
    return outcome


def measure(version: str, work: Path, plugin: bool) -> Coverage:
    result = Coverage(version)
    original = vllm_package(version)
    copy = work / version / "vllm"
    shutil.copytree(original, copy)
    runners = paired_runner_files(copy)
    result.runner_files = sorted(p.name for p in runners)
    result.rc106_before = sum(1 for f in check_paths([copy]).findings if f.code == "RC106")
    outcome = migrate_and_write(version, [copy])
    result.files_changed = len(outcome.changes)
    changed = set(outcome.changes)
    for path in sorted(runners):
        refusals = sorted(
            {
                r.code
                for r in outcome.refusals
                if r.kind == MERGE
                and (
                    r.path == path
                    or any(f"({path.name})" in h for h in getattr(r, "held_back", ()))
                )
            }
        )
        if path in changed and not refusals:
            result.migrated.append(path.name)
        else:
            result.refused[path.name] = refusals or ["unchanged"]
    for path in copy.rglob("*.py"):
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError:
            result.compiles = False
    result.rc106_after = sum(1 for f in check_paths([copy]).findings if f.code == "RC106")
    result.second_run_changes = len(apply([copy], select=(MERGE,), mode="check").changes)
    if plugin:
        before_root = work / f"{version}-original"
        shutil.copytree(original, before_root / "vllm")
        before = plugin_errors(before_root)
        after = plugin_errors(copy.parent)
        result.plugin_new = len(after - before)
    return result


def table(rows: list[Coverage]) -> str:
    head = (
        "| release | runner files | migrated | refused | compiles | RC106 before → after "
        "| second run | plugin |"
    )
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        refused = ", ".join(f"{n} ({'/'.join(c)})" for n, c in row.refused.items()) or "0"
        plugin = "—" if row.plugin_new is None else f"+{row.plugin_new}"
        lines.append(
            f"| {row.version} | {len(row.runner_files)} | {len(row.migrated)} | {refused} "
            f"| {'yes' if row.compiles else 'NO'} | {row.rc106_before} → {row.rc106_after} "
            f"| {row.second_run_changes} changes | {plugin} |"
        )
    total = sum(len(r.runner_files) for r in rows)
    done = sum(len(r.migrated) for r in rows)
    lines.append(f"\n{done} of {total} paired-broadcast runner files migrated.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--plugin", action="store_true", help="also compare mypy plugin errors")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    rows: list[Coverage] = []
    with tempfile.TemporaryDirectory(prefix="migrate-coverage-") as tmp:
        for version in args.versions:
            rows.append(measure(version, Path(tmp), args.plugin))
            print(f"{version}: done", file=sys.stderr)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    complete = all(
        not r.refused and r.compiles and r.rc106_after == 0 and r.second_run_changes == 0
        for r in rows
    )
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
