"""``check``'s errors on every cached vLLM release, this tree against a baseline.

For each release cached under ``~/.cache/runnercheck/vllm/<version>/vllm`` (see
``tests/vllm_wheels.py``; a release is downloaded by the tests or
``benchmarks/migrate_coverage.py``, never here) that ships ``vllm/worker/``,
``runnercheck check --format json`` runs from this tree and from the baseline commit
(default: where this branch left ``main``, see ``benchmarks/baseline.py``) with the same
interpreter. Per release: the error-level findings of each, and every error that one
side reports and the other does not (path relative to the release, line, code,
message), to be given a verdict by hand.

Usage::

    python benchmarks/precision.py [--versions 0.6.3 ...] [--ref main] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.baseline import (  # noqa: E402
    baseline_tree,
    default_ref,
    runnercheck_command,
    short,
    temporary,
)

CACHE = Path.home() / ".cache" / "runnercheck" / "vllm"
Error = tuple[str, int, str, str]


def cached_releases() -> list[str]:
    """Cached releases that ship ``vllm/worker/``, oldest first."""
    found = [p.name for p in CACHE.iterdir() if (p / "vllm" / "worker").is_dir()]

    def key(version: str) -> tuple[int, ...]:
        return tuple(
            int(part) for part in version.replace(".post", ".").split(".") if part.isdigit()
        )

    return sorted(found, key=key)


def errors(tree: Path, root: Path) -> list[Error]:
    """The error-level findings of ``check`` on ``root``, run from ``tree``."""
    cmd, env = runnercheck_command(tree, ["check", "--format", "json", str(root)])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check {root} failed ({proc.returncode}): {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    out = []
    for finding in data["findings"]:
        if finding.get("severity", "error") == "error":
            path = str(Path(finding["path"]).relative_to(root.parent))
            out.append((path, finding["line"], finding["code"], finding["message"]))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="*", help="releases (default: every cached one)")
    parser.add_argument("--ref", default=None, help="baseline commit (default: merge-base main)")
    parser.add_argument("--json", type=Path, help="write the per-release errors here")
    args = parser.parse_args(argv)
    ref = args.ref or default_ref()
    versions = args.versions or cached_releases()
    rows: list[dict[str, object]] = []
    with temporary() as tmp:
        base = baseline_tree(ref, Path(tmp))
        print(f"| release | errors ({short(ref)}) | errors (this tree) | changed |")
        print("| --- | --- | --- | --- |")
        for version in versions:
            root = CACHE / version / "vllm"
            before, after = errors(base, root), errors(REPO, root)
            gone = sorted(set(before) - set(after))
            new = sorted(set(after) - set(before))
            print(f"| {version} | {len(before)} | {len(after)} | -{len(gone)} +{len(new)} |")
            rows.append({"version": version, "before": before, "after": after})
            for sign, items in (("-", gone), ("+", new)):
                for path, line, code, message in items:
                    print(f"    {sign} {path}:{line} {code} {message[:160]}", file=sys.stderr)
    total_before = sum(len(r["before"]) for r in rows)  # type: ignore[arg-type]
    total_after = sum(len(r["after"]) for r in rows)  # type: ignore[arg-type]
    print(f"\n{len(rows)} releases: {total_before} errors at {short(ref)}, {total_after} here.")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
