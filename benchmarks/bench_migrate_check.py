"""``runnercheck migrate --check`` against ``runnercheck check``, whole process against
whole process, on the same tree (default: the merged ``vllm/`` of vLLM 0.5.1).

Both ask the same analysis layer; ``migrate --check`` pays for LibCST only when the
analysis finds something to rewrite. Measured, interleaved repetition after
repetition so that all see the same machine state:

* ``check``: ``runnercheck check --no-cache TREE`` (cold, like ``migrate --check``);
* ``migrate --check``: every codemod (on 0.5.1 the single-class codemods do find
  work: fixed ``from_broadcasted_tensor_dict`` returns, unbroadcast fields, a copied
  parent dict), so this includes LibCST parsing and verifying those files;
* ``migrate --check --select merge-broadcasts``: nothing to rewrite on a merged
  tree, the case a pre-commit hook meets on every commit;
* ``migrate --check`` in a checkout: the same tree beside a ``pyproject.toml`` with a
  ``[tool.mypy]`` section, as every vLLM checkout has (``--check`` runs no plain mypy,
  so this costs what the plain run does; the plain-mypy notes are ``--diff``'s);
* start-up: ``runnercheck check`` on one small file;
* before: ``check`` and the two ``migrate --check`` runs of an earlier commit
  (``--baseline``, default where this branch left ``main``, unpacked beside this tree by
  ``benchmarks/baseline.py``), interleaved with the others.

Times are the child processes' CPU seconds (user + system), which other work on a
shared machine disturbs less than wall time; wall times are reported too.

Usage::

    python benchmarks/bench_migrate_check.py [--version 0.5.1] [--reps 7] [--baseline REF]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import baseline  # noqa: E402
from benchmarks.common import spread  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402

#: vLLM's own mypy settings (its pyproject.toml from 0.4.1 on)
MYPY_CONFIG = (
    "[tool.mypy]\n"
    "ignore_missing_imports = true\n"
    "check_untyped_defs = true\n"
    'follow_imports = "skip"\n'
)

SMALL = "def prepare_model_input(self, seq_group_metadata_list):\n    return None\n"


IN_CHECKOUT = "migrate --check, beside a mypy configuration"


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(child CPU seconds, wall seconds, exit code) of ``runnercheck ARGS`` (``env``: that
    of the baseline tree)."""
    before = os.times()
    wall = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    wall = time.perf_counter() - wall
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"runnercheck {' '.join(args)} failed with exit {proc.returncode}")
    return cpu, wall, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.1", help="vLLM release (default 0.5.1)")
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--baseline", default=None, help="the before commit (default: where HEAD left main)"
    )
    args = parser.parse_args(argv)
    ref = args.baseline or baseline.default_ref()

    package = vllm_package(args.version)
    cwd = package.parent
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.py"
        small.write_text(SMALL)
        old_tree = Path(tmp) / "before"
        old_tree.mkdir()
        baseline.baseline_tree(ref, old_tree)
        baseline.compile_tree(REPO)
        old_env = baseline.environment(old_tree)
        checkout = Path(tmp) / "checkout"
        shutil.copytree(package, checkout / package.name)
        (checkout / "pyproject.toml").write_text(MYPY_CONFIG)
        cases: dict[str, list[str]] = {
            # cold, as migrate --check is (the facts cache would serve check alone)
            "check": ["check", "--no-cache", package.name],
            "migrate --check": ["migrate", "--check", package.name],
            "migrate --check --select merge-broadcasts": [
                "migrate",
                "--check",
                "--select",
                "merge-broadcasts",
                package.name,
            ],
            # cold (a project root would hold the facts cache)
            IN_CHECKOUT: ["migrate", "--check", "--no-cache", package.name],
            "startup: check one small file": ["check", "--no-cache", str(small)],
        }
        # the same runs of the baseline tree
        cases |= {f"before: {name}": case for name, case in list(cases.items())[:4]}
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        exits: dict[str, int] = {}
        for _ in range(args.reps):
            for name, case in cases.items():
                env = old_env if name.startswith("before: ") else None
                where = checkout if name.endswith(IN_CHECKOUT) else cwd
                cpu, wall, code = run(case, where, env)
                samples[name].append((cpu, wall))
                exits[name] = code

    cpu = {name: spread([s[0] for s in values]) for name, values in samples.items()}
    wall = {name: spread([s[1] for s in values]) for name, values in samples.items()}
    per_pair = {
        f"{when}{name}": spread(
            [
                m[0] / c[0]
                for m, c in zip(samples[when + name], samples[when + "check"], strict=True)
            ]
        )
        for when in ("before: ", "")
        for name in ("migrate --check", "migrate --check --select merge-broadcasts", IN_CHECKOUT)
    }
    print(
        f"vLLM {args.version} vllm/, {args.reps} interleaved repetitions (child CPU seconds), "
        f"before = {baseline.short(ref)}"
    )
    print(f"{'':52} {'cpu median':>10} {'min':>7} {'max':>7}   {'wall median':>11}  exit")
    for name in cases:
        c, w = cpu[name], wall[name]
        print(
            f"{name:52} {c['median']:10.3f} {c['min']:7.3f} {c['max']:7.3f}   "
            f"{w['median']:11.3f}  {exits[name]}"
        )
    for name, ratio in per_pair.items():
        print(
            f"{name} / {'before: ' if name.startswith('before') else ''}check = "
            f"{ratio['median']:.2f}x "
            f"(min {ratio['min']:.2f}, max {ratio['max']:.2f}; target <= 1.5x)"
        )
    if args.json:
        figures = {
            "version": args.version,
            "cpu_s": cpu,
            "wall_s": wall,
            "exit": exits,
            "baseline": baseline.short(ref),
            "ratio_to_check": per_pair,
            "target_ratio": 1.5,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
