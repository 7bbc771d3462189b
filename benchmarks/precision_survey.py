"""Precision of ``runnercheck check`` on every engine tree at hand, finding by finding.

Trees:

* every cached vLLM release that ships ``vllm/worker/`` (the wheels' ``vllm/``, see
  ``tests/vllm_wheels.py``; ``--download`` fetches the missing ones of ``--versions``);
* every tag of every fork or vendor plugin under ``--mirror`` (bare git repositories,
  ``<mirror>/<owner>+<name>/repo``) whose worker package still uses the worker
  contract (it mentions ``broadcast_tensor_dict``, ``ModelRunnerBase`` or
  ``execute_model``). A full fork
  (it has ``vllm/worker/``) is checked alone; a plugin is checked with ``--context``
  set to the newest cached vLLM release not newer than its tag. ``--tags`` keeps
  the newest tag per minor version (``latest``, the default) or every tag (``all``).

Every error is looked up in the review ledger ``precision_verdicts.toml`` (a rule,
a text the message holds and, optionally, a text the path holds, with a verdict:
``true``, ``harmless`` or ``false``, and the reason). What no entry matches is listed
as *unreviewed*: read it, then add its verdict. Nothing from the trees is kept.

Usage::

    python benchmarks/precision_survey.py [--mirror /work/.mirror] [--tags latest|all]
        [--code DIR] [--json out.json] [--show unreviewed|all]

``--code DIR`` runs the ``runnercheck`` of another checkout (a baseline unpacked by
``benchmarks/baseline.py``) on the same trees, for a before/after table.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.vllm_wheels import cache_root  # noqa: E402

LEDGER = Path(__file__).with_name("precision_verdicts.toml")
CONTRACT = ("broadcast_tensor_dict", "ModelRunnerBase", "execute_model")
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(.*)$")


@dataclass(frozen=True)
class Tree:
    name: str
    path: Path
    context: Path | None = None


@dataclass
class Verdict:
    rule: str
    message: str
    verdict: str
    reason: str
    path: str = ""
    seen: int = 0


@dataclass
class Result:
    tree: str
    errors: list[dict[str, object]] = field(default_factory=list)
    failure: str = ""


def version_key(text: str) -> tuple[int, int, int, str]:
    m = VERSION.match(text)
    if not m:
        return (0, 0, 0, text)
    return (int(m[1]), int(m[2]), int(m[3]), m[4])


def releases() -> list[Tree]:
    root = cache_root()
    out = []
    for d in sorted(root.iterdir() if root.is_dir() else [], key=lambda p: version_key(p.name)):
        if (d / ".complete").is_file() and (d / "vllm" / "worker").is_dir():
            out.append(Tree(f"vllm {d.name}", d / "vllm"))
    return out


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    ).stdout


def contract_packages(repo: Path, tag: str) -> list[str]:
    """The top-level packages of ``tag`` whose ``worker/`` uses the contract."""
    patterns = [arg for word in CONTRACT for arg in ("-e", word)]
    files = git(repo, "grep", "-l", *patterns, tag, "--", "*/worker/*.py")
    packages = set()
    for line in files.splitlines():
        path = line.split(":", 1)[1]
        top = path.split("/", 1)[0]
        if "/worker/" in path and top not in {"tests", "benchmarks", "examples"}:
            packages.add(top)
    return sorted(packages)


def pick_tags(repo: Path, mode: str) -> list[str]:
    tags = [t for t in git(repo, "tag").split() if VERSION.match(t)]
    if mode == "all":
        return sorted(tags, key=version_key)
    newest: dict[tuple[int, int], str] = {}
    for tag in sorted(tags, key=version_key):
        major, minor = version_key(tag)[:2]
        newest[(major, minor)] = tag
    return [newest[k] for k in sorted(newest)]


def base_release(tag: str, cached: list[Tree]) -> Path | None:
    """The newest cached vLLM release not newer than the plugin's tag."""
    want = version_key(tag)[:3]
    best = None
    for tree in cached:
        if version_key(tree.name.split()[-1])[:3] <= want:
            best = tree.path
    return best


def forks(mirror: Path, mode: str, cached: list[Tree], scratch: Path) -> list[Tree]:
    out = []
    for repo in sorted(mirror.glob("*/repo")):
        owner_name = repo.parent.name.replace("+", "/")
        for tag in pick_tags(repo, mode):
            packages = contract_packages(repo, tag)
            if not packages:
                continue
            dest = scratch / repo.parent.name / tag
            dest.mkdir(parents=True)
            archive = subprocess.run(
                ["git", "-C", str(repo), "archive", tag, *packages],
                capture_output=True,
                check=True,
            ).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(dest, filter="data")
            full_fork = "vllm" in packages
            for package in packages:
                context = None if full_fork else base_release(tag, cached)
                out.append(Tree(f"{owner_name} {tag} {package}/", dest / package, context))
    return out


def run_check(code: Path, tree: Tree) -> Result:
    cmd = [sys.executable, "-m", "runnercheck", "check", "--format", "json", "--no-cache"]
    if tree.context is not None:
        cmd += ["--context", str(tree.context)]
    cmd.append(str(tree.path))
    env = dict(os.environ, PYTHONPATH=str(code))
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tree.path.parent, env=env)
    result = Result(tree.name)
    if proc.returncode not in (0, 1):
        result.failure = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return result
    report = json.loads(proc.stdout)
    for f in report["findings"]:
        if f["severity"] == "error":
            f["path"] = os.path.relpath(f["path"], tree.path.parent)
            result.errors.append(f)
    return result


def load_ledger() -> list[Verdict]:
    with LEDGER.open("rb") as fh:
        data = tomllib.load(fh)
    return [Verdict(**entry) for entry in data["verdict"]]


def judge(error: dict[str, object], ledger: list[Verdict]) -> Verdict | None:
    for v in ledger:
        if (
            v.rule == error["code"]
            and v.message in str(error["message"])
            and v.path in str(error["path"])
        ):
            v.seen += 1
            return v
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--tags", choices=("latest", "all"), default="latest")
    parser.add_argument("--code", type=Path, default=REPO)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-releases", action="store_true", help="forks and plugins only")
    parser.add_argument("--show", choices=("unreviewed", "all"), default="unreviewed")
    args = parser.parse_args(argv)

    ledger = load_ledger()
    cached = releases()
    with tempfile.TemporaryDirectory() as tmp:
        trees = ([] if args.no_releases else cached) + (
            forks(args.mirror, args.tags, cached, Path(tmp)) if args.mirror.is_dir() else []
        )
        results = [run_check(args.code, tree) for tree in trees]

    totals: Counter[str] = Counter()
    rows = []
    for result in results:
        counts: Counter[str] = Counter()
        for error in result.errors:
            v = judge(error, ledger)
            kind = v.verdict if v else "unreviewed"
            counts[kind] += 1
            error["verdict"] = kind
            error["reason"] = v.reason if v else ""
            if args.show == "all" or v is None:
                print(
                    f"  {result.tree}: {error['path']}:{error['line']} {error['code']} [{kind}] {error['message'][:160]}"
                )
        totals.update(counts)
        rows.append((result.tree, len(result.errors), counts, result.failure))

    print(
        f"\n{'tree':<52} {'errors':>6} {'true':>5} {'harmless':>8} {'false':>5} {'unreviewed':>10}"
    )
    for name, n, counts, failure in rows:
        if failure:
            print(f"{name:<52} failed: {failure}")
            continue
        print(
            f"{name:<52} {n:>6} {counts['true']:>5} {counts['harmless']:>8} "
            f"{counts['false']:>5} {counts['unreviewed']:>10}"
        )
    n = sum(totals.values())
    share = totals["true"] / n if n else 0.0
    print(
        f"\n{len(rows)} trees, {n} errors: {totals['true']} true ({share:.0%}), "
        f"{totals['harmless']} harmless, {totals['false']} false, {totals['unreviewed']} unreviewed"
    )
    unused = [v for v in ledger if not v.seen]
    for v in unused:
        print(f"ledger entry matched nothing: {v.rule} {v.message!r}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"trees": [r.__dict__ for r in results], "totals": dict(totals)},
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
