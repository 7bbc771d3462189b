"""``runnercheck demo``: the whole story on the legacy engine that runnercheck ships.

Stages, each on a copy in a temporary directory (the package's own files are never
touched):

1. ``check``: the legacy engine has paired broadcasts (RC106 for each worker/runner pair).
2. ``migrate``: ``runnercheck migrate`` (the codemods) rewrites the copy into the merged shape.
3. ``recheck``: ``runnercheck check`` finds the migrated copy clean.
4. ``mypy``: mypy with the runnercheck plugin finds the migrated copy clean.
5. ``fuzz``: the migrated input classes round-trip through a real 2-process broadcast.
6. ``engines``: the legacy engine and the migrated copy run at the same tensor-parallel
   size and seed: identical ``tokens_sha256``, broadcasts per step 2 -> 1, step-time ratio.

Every stage reports ``ok``; the demo exits non-zero when any stage disagrees.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: mypy configuration for the migrated copy: the README's snippet, the plugin and nothing
#: else, so the generated code is checked against real torch types as well.
MYPY_INI = "[mypy]\nplugins = mypy_plugin\n"


@dataclass
class StageResult:
    name: str
    ok: bool
    summary: str
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "summary": self.summary,
            "seconds": round(self.seconds, 3),
            "details": self.details,
        }


@dataclass
class DemoOptions:
    tp: int = 2
    steps: int = 48
    repeats: int = 4
    fuzz_examples: int = 40
    seed: int = 0
    keep: Path | None = None


@dataclass
class Workspace:
    root: Path
    legacy: Path
    migrated: Path


def prepare_workspace(root: Path) -> Workspace:
    """Two copies of the shipped legacy engine: one stays legacy, one is migrated."""
    from runnercheck.demo.engine import engine_source_dir

    source = engine_source_dir("legacy")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    legacy = root / "legacy_engine"
    migrated = root / "migrated_engine"
    shutil.copytree(source, legacy, ignore=ignore)
    shutil.copytree(source, migrated, ignore=ignore)
    return Workspace(root, legacy, migrated)


def stage_check(ws: Workspace, options: DemoOptions) -> StageResult:
    from runnercheck.check import check_paths
    from runnercheck.check.report import finding_json

    result = check_paths([ws.migrated])
    paired = [f for f in result.findings if f.code == "RC106"]
    other = [f for f in result.findings if f.code != "RC106"]
    return StageResult(
        "check",
        ok=bool(paired) and not other,
        summary=f"{len(paired)} paired-broadcast findings (RC106), {len(other)} other",
        details={"findings": [finding_json(f) for f in result.findings], "files": result.summary()},
    )


def stage_migrate(ws: Workspace, options: DemoOptions) -> StageResult:
    """``runnercheck migrate`` on the copy, run as a user runs it: the command line finds
    the command through its entry point (:mod:`runnercheck.commands.registry`), and its
    JSON report says what was written and what was refused. ``--no-mypy``: the
    ``mypy`` stage type-checks the whole migrated copy, with the plugin, next."""
    cmd = [
        sys.executable,
        "-m",
        "runnercheck",
        "migrate",
        "--quiet",
        "--format",
        "json",
        "--no-cache",
        "--no-mypy",
        ws.migrated.name,
    ]
    proc = subprocess.run(cmd, cwd=ws.root, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1):  # a usage or input error, said in one line
        said = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        return StageResult(
            "migrate",
            ok=False,
            summary=said[-1],
            details={"returncode": proc.returncode, "stderr": proc.stderr[-2000:]},
        )
    report = json.loads(proc.stdout)
    names = sorted(  # (paths are said relative to the current directory, where they can be)
        str((ws.root / change["path"]).resolve().relative_to(ws.migrated.resolve()))
        for change in report["changes"]
        if change["written"]
    )
    refusals = [f"{r['path']}:{r['line']}: {r['code']} {r['message']}" for r in report["refusals"]]
    return StageResult(
        "migrate",
        ok=bool(names) and not refusals,
        summary=f"{len(names)} files written ({', '.join(names)}), {len(refusals)} refused",
        details={"written": names, "refusals": refusals},
    )


def stage_recheck(ws: Workspace, options: DemoOptions) -> StageResult:
    from runnercheck.check import check_paths
    from runnercheck.check.report import finding_json

    result = check_paths([ws.migrated])
    return StageResult(
        "recheck",
        ok=not result.findings,
        summary=f"{len(result.findings)} findings after migration",
        details={"findings": [finding_json(f) for f in result.findings], "files": result.summary()},
    )


def mypy_cache_dir(ws: Workspace) -> Path:
    """mypy's incremental cache for the demo, kept between runs in the user's cache
    directory (most of a cold run is reading torch; the migrated copy is checked every
    time, mypy's cache knows it changed); the workspace's when that cannot be made."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cache = (
        Path(base) / "runnercheck" / "demo-mypy" / f"py{sys.version_info[0]}{sys.version_info[1]}"
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ws.root / ".mypy_cache"
    return cache


def stage_mypy(ws: Workspace, options: DemoOptions) -> StageResult:
    cache = mypy_cache_dir(ws)
    # beside its cache, at a path that does not change from run to run: the plugin's
    # fingerprint names the configuration file, and a new name would recheck torch
    config = cache / "mypy.ini" if cache != ws.root / ".mypy_cache" else ws.root / "mypy.ini"
    try:
        if not config.is_file() or config.read_text(encoding="utf-8") != MYPY_INI:
            partial = config.with_name(f".mypy.ini.{os.getpid()}")
            partial.write_text(MYPY_INI, encoding="utf-8")
            os.replace(partial, config)  # whole for a demo running beside this one
    except OSError:
        config = ws.root / "mypy.ini"
        config.write_text(MYPY_INI, encoding="utf-8")
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(config),
        "--cache-dir",
        str(cache),
        "--no-error-summary",
        ws.migrated.name,
    ]
    proc = subprocess.run(cmd, cwd=ws.root, capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    return StageResult(
        "mypy",
        ok=proc.returncode == 0 and not errors,
        summary=f"mypy with the plugin: {len(errors)} errors",
        details={"errors": errors, "returncode": proc.returncode, "stderr": proc.stderr[-2000:]},
    )


def stage_fuzz(ws: Workspace, options: DemoOptions) -> StageResult:
    from runnercheck.config import Config
    from runnercheck.demo.engine.attention import TinyAttentionBackend
    from runnercheck.fuzz import FuzzOptions, fuzz, resolve_all

    config = Config()
    # what is imported by now lives to the end: Hypothesis's first full collection
    # (and every later one) then skips torch's objects
    gc.freeze()
    sys.path.insert(0, str(ws.root))
    try:
        targets = resolve_all([str(ws.migrated)], config.contract())
        report = fuzz(
            targets,
            FuzzOptions(
                world_size=2,
                examples=options.fuzz_examples,
                seed=options.seed,
                attn_backend=TinyAttentionBackend,  # as the engine's workers pass it
            ),
            config,
        )
    finally:
        sys.path.remove(str(ws.root))
    data = report.as_json()
    classes = [t.name.rsplit(":", 1)[-1] for t in targets]
    return StageResult(
        "fuzz",
        ok=bool(report.passed) and bool(classes),
        summary=f"{len(classes)} input classes round-tripped on 2 ranks: "
        + ("all passed" if report.passed else "FAILED"),
        details={"classes": classes, "report": data},
    )


def stage_engines(ws: Workspace, options: DemoOptions) -> StageResult:
    from runnercheck.demo.engine import run_engine

    runs: dict[str, list[dict[str, Any]]] = {"legacy": [], "migrated": []}
    for _ in range(options.repeats):  # interleaved, so drift hits both alike
        for label, directory in (("legacy", ws.legacy), ("migrated", ws.migrated)):
            runs[label].append(
                run_engine(
                    None,
                    tp=options.tp,
                    steps=options.steps,
                    seed=options.seed,
                    engine_dir=str(directory),
                    warmup_steps=2,
                    fork_server=True,  # 2 x repeats runs: torch imported once
                )
            )
    legacy, migrated = runs["legacy"], runs["migrated"]
    hashes = {r["tokens_sha256"] for r in legacy + migrated}
    ratios = [
        old["step_time_s"] / new["step_time_s"] for old, new in zip(legacy, migrated, strict=True)
    ]
    bcast_old = legacy[0]["broadcasts_per_step"]
    bcast_new = migrated[0]["broadcasts_per_step"]
    ratio = statistics.median(ratios)
    return StageResult(
        "engines",
        ok=len(hashes) == 1 and bcast_old == 2 and bcast_new == 1,
        summary=(
            f"tp={options.tp}, {options.steps} steps: tokens_sha256 "
            f"{'identical' if len(hashes) == 1 else 'DIFFER'}, broadcasts/step "
            f"{bcast_old:g} -> {bcast_new:g}, legacy/migrated step time {ratio:.2f}x "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {options.repeats} runs each)"
        ),
        details={
            "tokens_sha256": sorted(hashes),
            "broadcasts_per_step": {"legacy": bcast_old, "migrated": bcast_new},
            "step_time_ratio": {"median": ratio, "min": min(ratios), "max": max(ratios)},
            "step_time_s": {
                "legacy": [r["step_time_s"] for r in legacy],
                "migrated": [r["step_time_s"] for r in migrated],
            },
        },
    )


STAGES: tuple[tuple[str, Callable[[Workspace, DemoOptions], StageResult]], ...] = (
    ("check the legacy engine", stage_check),
    ("migrate a copy", stage_migrate),
    ("check the migrated copy", stage_recheck),
    ("mypy with the plugin", stage_mypy),
    ("fuzz the new input classes", stage_fuzz),
    ("run both engines", stage_engines),
)


def run_demo(
    options: DemoOptions, on_stage: Callable[[str, StageResult | None], None] | None = None
) -> list[StageResult]:
    """Run every stage (later stages still run after a failure, so the report is whole)."""
    results: list[StageResult] = []
    with tempfile.TemporaryDirectory(prefix="runnercheck-demo-") as tmp:
        root = Path(tmp)
        ws = prepare_workspace(root)
        for title, stage in STAGES:
            if on_stage:
                on_stage(title, None)
            started = time.perf_counter()
            try:
                result = stage(ws, options)
            except Exception as exc:  # a stage that breaks is a failed stage, not a traceback
                result = StageResult(
                    stage.__name__.removeprefix("stage_"),
                    ok=False,
                    summary=f"{type(exc).__name__}: {exc}".splitlines()[0],
                )
            result.seconds = time.perf_counter() - started
            results.append(result)
            if on_stage:
                on_stage(title, result)
        if options.keep is not None:
            shutil.copytree(root, options.keep, dirs_exist_ok=True)
    return results
