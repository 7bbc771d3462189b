"""``fold-control-broadcast`` on vLLM's V0 speculative-decoding worker, release by release.

For every release (the wheels' ``vllm/`` package, downloaded once and cached, see
``tests/vllm_wheels.py``) and for the engine's own speculative package as it was before
the fold (``engine``: its wrapper as vLLM 0.5.1 ships it; ``engine-v06``: as 0.6.x-0.9.x
do, where the control values select the first inner step), on a fresh copy of
``vllm/spec_decode`` and ``vllm/worker``:

* *RC110 before / after*: ``check`` on the copy, before and after migrate: errors (the
  fold applies) and notes (the fold refuses that code, MIG204);
* *rewritten*: whether ``migrate --select fold-control-broadcast`` rewrote
  ``spec_decode_worker.py``; else *refused*: the code and the shape it names (a note of
  ``migrate`` where the plan shows the fold cannot apply, else a refusal);
* *compiles*: every file of the copy compiles after the run;
* *plugin*: mypy (``--no-site-packages --ignore-missing-imports --follow-imports=silent``
  and the plugin) on ``spec_decode_worker.py`` before and after: the errors the rewrite
  adds (``+0``), ``—`` when nothing was rewritten (the file is byte-identical).

Usage::

    python benchmarks/spec_decode_vllm.py [--versions 0.5.1 0.8.0 engine] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
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
from codemods.framework import registry  # noqa: E402
from runnercheck.check import check_paths  # noqa: E402
from tests.spec_decode_fixture import (  # noqa: E402
    BEFORE_WORKER,
    SPEC_DECODE,
    V06_WORKER,
    copy_before,
)
from tests.vllm_wheels import vllm_package  # noqa: E402

VERSIONS = (
    "0.5.1",
    "0.5.3.post1",
    "0.6.0",
    "0.6.3",
    "0.7.3",
    "0.8.0",
    "0.8.5",
    "engine",
    "engine-v06",
)
#: The engine's speculative package before the fold: its wrapper as vLLM 0.5.1 ships it
#: (one first inner step), and as 0.6.x-0.9.x do (the control values select it).
ENGINE = {"engine": BEFORE_WORKER, "engine-v06": V06_WORKER}
FOLD = registry.FOLD_CONTROL_BROADCAST.name
MYPY_FLAGS = ("--no-site-packages", "--ignore-missing-imports", "--follow-imports=silent")
MYPY_INI = "[mypy]\nplugins = mypy_plugin\n"
_LINE = re.compile(r"^([^:]+):\d+: (error|note): ")


@dataclass
class Row:
    version: str
    target: str = ""
    rc110_before: int = 0
    rc110_after: int = 0
    #: RC110 notes (the fold refuses the code: no error for what migrate cannot fix)
    rc110_notes_before: int = 0
    rc110_notes_after: int = 0
    rewritten: bool = False
    refused: list[dict[str, str]] = field(default_factory=list)
    compiles: bool = True
    #: errors mypy with the plugin adds on the rewritten file (None: nothing rewritten)
    plugin_new: int | None = None
    plugin_before: int | None = None


def copy_tree(version: str, work: Path) -> tuple[Path, Path]:
    """(the root given to migrate and check, the wrapper's file) for a fresh copy."""
    root = work / version
    if version in ENGINE:
        copy_before(root / "engine" / "spec_decode", ENGINE[version])
        shutil.copytree(SPEC_DECODE.parent / "merged", root / "engine" / "merged")
        return root, root / "engine" / "spec_decode" / "spec_decode_worker.py"
    package = vllm_package(version)
    for part in ("spec_decode", "worker"):
        shutil.copytree(package / part, root / "vllm" / part)
    return root, root / "vllm" / "spec_decode" / "spec_decode_worker.py"


def rc110(root: Path) -> tuple[int, int]:
    """RC110 errors and notes of ``check`` on ``root``."""
    result = check_paths([root], select=["RC110"])
    return (
        sum(1 for f in result.findings if f.code == "RC110"),
        sum(1 for f in result.notes if f.code == "RC110"),
    )


def _shape_and_message(note: str) -> tuple[str, str]:
    """The shape and the plan's message of a fold note (``MIG204 [fold-control-broadcast]
    left alone, no automatic fix applies (SHAPE): MESSAGE``)."""
    head, _, message = note.partition("): ")
    return head.rpartition(" (")[2], message


def mypy_errors(root: Path, target: Path) -> list[str]:
    """mypy's error lines on ``target`` (line numbers dropped: the rewrite moves lines)."""
    (root / "mypy.ini").write_text(MYPY_INI)
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file", str(root / "mypy.ini"),
            "--cache-dir", str(root / ".mypy_cache"), *MYPY_FLAGS, "--show-error-codes",
            str(target.relative_to(root)),
        ],
        cwd=root, capture_output=True, text=True, timeout=900,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if "runnercheck mypy plugin: error" in proc.stderr or proc.returncode not in (0, 1):
        raise RuntimeError(f"mypy failed on {target}: {proc.stderr[-500:]}")
    return sorted(
        _LINE.sub(r"\1: \2: ", line)
        for line in proc.stdout.splitlines()
        if _LINE.match(line) and ": error: " in line
    )


def measure(version: str, work: Path) -> Row:
    root, target = copy_tree(version, work)
    row = Row(version, target.relative_to(root).as_posix())
    row.rc110_before, row.rc110_notes_before = rc110(root)
    original = target.read_bytes()
    before_root = work / f"{version}-original"
    shutil.copytree(root, before_root)
    outcome = apply([root], select=(FOLD,))
    unwritten = [r for r in outcome.refusals if r.kind == "write"]
    if unwritten:
        raise SystemExit(f"{version}: writing failed: {unwritten[0]}")
    row.rewritten = target in outcome.changes and target.read_bytes() != original
    row.refused = [
        {"code": r.code, "shape": r.shape, "line": str(r.line), "message": r.message}
        for r in outcome.refusals
        if r.kind == FOLD
    ]
    # a fold the plan shows cannot apply is a note of migrate's (it fails no run)
    row.refused += [
        {"code": n.code, "shape": shape, "line": str(n.line), "message": message}
        for n in outcome.notes
        if n.kind == "fold" and n.code
        for shape, message in [_shape_and_message(n.message)]
    ]
    for path in root.rglob("*.py"):
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError:
            row.compiles = False
    row.rc110_after, row.rc110_notes_after = rc110(root)
    if row.rewritten:
        before = mypy_errors(before_root, before_root / target.relative_to(root))
        after = mypy_errors(root, target)
        row.plugin_before = len(before)
        row.plugin_new = len([e for e in after if e not in before])
    return row


def table(rows: list[Row]) -> str:
    lines = [
        "| release | rewritten | compiles | RC110 before → after (notes) | plugin "
        "| refused (shape) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        refused = "; ".join(f"{r['code']} at :{r['line']}: {r['shape']}" for r in row.refused)
        plugin = "—" if row.plugin_new is None else f"+{row.plugin_new}"
        lines.append(
            f"| {row.version} | {'yes' if row.rewritten else 'no'} "
            f"| {'yes' if row.compiles else 'NO'} | {row.rc110_before} → {row.rc110_after} "
            f"({row.rc110_notes_before} → {row.rc110_notes_after}) "
            f"| {plugin} | {refused or '—'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="spec-decode-vllm-") as tmp:
        for version in args.versions:
            rows.append(measure(version, Path(tmp)))
            print(f"{version}: done", file=sys.stderr)
    print(table(rows))
    for row in rows:
        for refusal in row.refused:
            print(f"{row.version}: {refusal['code']} {refusal['message']}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    # every row either rewritten cleanly or refused with a shape named
    sound = all(
        r.compiles
        and (
            (r.rewritten and r.rc110_after == r.rc110_notes_after == 0 and r.plugin_new == 0)
            or (
                not r.rewritten
                and r.refused
                and all(x["shape"] for x in r.refused)
                and r.rc110_after == 0  # a refused fold is no error of check's
            )
        )
        for r in rows
    )
    return 0 if sound else 1


if __name__ == "__main__":
    raise SystemExit(main())
