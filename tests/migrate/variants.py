"""Legacy variants of the shipped engine, built at test time from
``runnercheck/demo/engine/legacy`` and one edit each, so that they follow the engine.

Each variant is a unified diff in ``fixtures/variants/``:

* ``<name>.diff``: the variant's legacy tree (``before``), as an edit of its base's:
  ``gpu_only`` is the legacy engine's GPU files (no embedding or CPU runner), the
  others change ``gpu_only`` or another variant in one way each, or start from the
  legacy engine's GPU files plus some of its other files (``legacy_files``);
* ``<name>.migrated.diff``: what ``migrate`` should write (``after``), as an edit of the
  base's ``after`` plus the files the variant adds (as they are before).

Every hunk must apply exactly where it says (no fuzz, no offset): an engine change that
touches an edited line stops the tests with the file and line, and the diff is made
again. ``python -m tests.migrate.variants NAME...`` writes the ``migrated`` diffs of
those variants from what ``migrate`` writes now (review the change as a golden's);
``--before NAME DIR`` writes a variant's ``diff`` from a tree.
"""

from __future__ import annotations

import argparse
import difflib
import re
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEGACY = REPO / "runnercheck" / "demo" / "engine" / "legacy"
DIFFS = Path(__file__).parent / "fixtures" / "variants"
#: the legacy engine's files ``gpu_only`` starts from
GPU_FILES = ("__init__.py", "model_runner.py", "worker.py", "worker_base.py")

Tree = dict[str, str]


@dataclass(frozen=True)
class Variant:
    #: the variant this one edits (None: the legacy engine's :data:`GPU_FILES`)
    base: str | None
    #: files copied from another of the base's before the edit: new name -> copied
    copies: dict[str, str] = field(default_factory=dict)
    #: the legacy engine's files besides :data:`GPU_FILES` a variant without a base
    #: starts from
    legacy_files: tuple[str, ...] = ()


VARIANTS: dict[str, Variant] = {
    "gpu_only": Variant(None),
    "after_split": Variant("gpu_only"),
    "extra_broadcast": Variant("gpu_only"),
    "request_after_prepare": Variant("gpu_only"),
    "hardware_subclass": Variant("gpu_only"),
    "shared_worker_input": Variant("hardware_subclass", copies={"hpu_worker.py": "worker.py"}),
    "sampling_flag": Variant("gpu_only"),
    # two runners whose inputs differ in one field each (sampling vs pooling metadata)
    "twin_inputs": Variant(None, legacy_files=("embedding_model_runner.py",)),
}

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    """A diff that does not apply exactly."""


def _path(header: str, prefix: str) -> str | None:
    name = header[4:].rstrip("\n").split("\t")[0]
    if name == "/dev/null":
        return None
    if not name.startswith(prefix):
        raise DiffError(f"{header.strip()!r}: a path starts with {prefix!r}")
    return name[len(prefix) :]


def apply_diff(tree: Tree, diff: str, source: str = "<diff>") -> Tree:
    """``tree`` (relative path -> text) with the unified diff ``diff`` applied: every
    hunk's context and removed lines must stand exactly at the line it names."""
    out = dict(tree)
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- ") or i + 1 >= len(lines):
            raise DiffError(f"{source}:{i + 1}: expected a '--- a/<file>' header")
        if not lines[i + 1].startswith("+++ "):
            raise DiffError(f"{source}:{i + 2}: expected a '+++ b/<file>' header")
        old_name, new_name = _path(lines[i], "a/"), _path(lines[i + 1], "b/")
        name = new_name or old_name
        assert name is not None
        if old_name is None and name in out:
            raise DiffError(f"{source}:{i + 1}: {name} is created but already exists")
        if old_name is not None and old_name not in out:
            raise DiffError(f"{source}:{i + 1}: {old_name} is changed but does not exist")
        text = out.get(old_name or "", "").splitlines(keepends=True) if old_name else []
        result: list[str] = []
        pos = 0
        i += 2
        while i < len(lines) and lines[i].startswith("@@ "):
            match = _HUNK.match(lines[i])
            if match is None:
                raise DiffError(f"{source}:{i + 1}: not a hunk header: {lines[i].strip()!r}")
            old_count = int(match[2]) if match[2] is not None else 1
            new_count = int(match[4]) if match[4] is not None else 1
            start = int(match[1]) - (1 if old_count else 0)
            if start < pos:
                raise DiffError(f"{source}:{i + 1}: hunks of {name} out of order")
            result += text[pos:start]
            pos = start
            i += 1
            seen_old = seen_new = 0
            while seen_old < old_count or seen_new < new_count:
                if i >= len(lines):
                    raise DiffError(f"{source}: the last hunk of {name} is cut short")
                # an empty context line may have lost its space to an editor
                kind, body = (" ", "\n") if lines[i] == "\n" else (lines[i][:1], lines[i][1:])
                if kind in (" ", "-"):
                    have = text[pos] if pos < len(text) else "<end of file>"
                    if have != body:
                        raise DiffError(
                            f"{source}:{i + 1}: does not apply to {name}: its line {pos + 1} "
                            f"is {have!r}, the diff expects {body!r}"
                        )
                    pos += 1
                    seen_old += 1
                    if kind == " ":
                        result.append(body)
                        seen_new += 1
                elif kind == "+":
                    result.append(body)
                    seen_new += 1
                else:
                    raise DiffError(f"{source}:{i + 1}: not a hunk line: {lines[i]!r}")
                i += 1
        result += text[pos:]
        if old_name is not None and new_name is None:
            if result:
                raise DiffError(f"{source}: {old_name} is deleted but lines are left")
            del out[old_name]
        else:
            if old_name is not None and old_name != name:
                del out[old_name]
            out[name] = "".join(result)
    return out


def make_diff(old: Tree, new: Tree) -> str:
    """The unified diff from ``old`` to ``new`` (what :func:`apply_diff` reads)."""
    parts: list[str] = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        parts += difflib.unified_diff(
            (a or "").splitlines(keepends=True),
            (b or "").splitlines(keepends=True),
            fromfile=f"a/{name}" if a is not None else "/dev/null",
            tofile=f"b/{name}" if b is not None else "/dev/null",
        )
    return "".join(parts)


def _diff(name: str, kind: str) -> str:
    return (DIFFS / f"{name}{kind}").read_text()


def _start(name: str) -> Tree:
    """What a variant's ``diff`` edits: its base's tree with the copies made."""
    variant = VARIANTS[name]
    if variant.base is None:
        tree = {f: (LEGACY / f).read_text() for f in (*GPU_FILES, *variant.legacy_files)}
    else:
        tree = before(variant.base)
    for new, copied in variant.copies.items():
        tree[new] = tree[copied]
    return tree


@cache
def _before(name: str) -> tuple[tuple[str, str], ...]:
    tree = apply_diff(_start(name), _diff(name, ".diff"), f"{name}.diff")
    return tuple(sorted(tree.items()))


def before(name: str) -> Tree:
    """The variant's legacy tree (relative path -> text)."""
    return dict(_before(name))


def _after_start(name: str) -> Tree:
    """What a variant's ``migrated.diff`` edits: its base's ``after`` with the files the
    variant adds, as they are before."""
    variant = VARIANTS[name]
    base_after = after(variant.base) if variant.base is not None else {}
    base_before = before(variant.base) if variant.base is not None else {}
    own = before(name)
    return {**base_after, **{f: t for f, t in own.items() if f not in base_before}}


@cache
def _after(name: str) -> tuple[tuple[str, str], ...]:
    variant = VARIANTS[name]
    start = _after_start(name) if variant.base is not None else before(name)
    tree = apply_diff(start, _diff(name, ".migrated.diff"), f"{name}.migrated.diff")
    return tuple(sorted(tree.items()))


def after(name: str) -> Tree:
    """What ``migrate`` writes on the variant (relative path -> text)."""
    return dict(_after(name))


def write(tree: Tree, target: Path) -> Path:
    """The tree as files under ``target`` (made; it must not exist)."""
    target.mkdir(parents=True)
    for name, text in tree.items():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return target


def snapshot(tree: Tree) -> dict[str, bytes]:
    """The tree as :func:`tests.migrate.conftest.snapshot` reads a directory."""
    return {name: text.encode() for name, text in sorted(tree.items())}


def read(root: Path) -> Tree:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def migrated(name: str) -> Tree:
    """What ``migrate`` writes now on the variant's legacy tree."""
    from runnercheck.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        work = write(before(name), Path(tmp) / name)
        if main(["migrate", str(work)]) not in (0, 1):
            raise SystemExit(f"{name}: migrate failed")
        return read(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="variants whose migrated diff is written")
    parser.add_argument(
        "--before", nargs=2, metavar=("NAME", "DIR"), help="write NAME.diff from the tree DIR"
    )
    args = parser.parse_args(argv)
    if args.before:
        name, directory = args.before
        (DIFFS / f"{name}.diff").write_text(make_diff(_start(name), read(Path(directory))))
        _before.cache_clear()
    for name in args.names:
        variant = VARIANTS[name]
        start = _after_start(name) if variant.base is not None else before(name)
        (DIFFS / f"{name}.migrated.diff").write_text(make_diff(start, migrated(name)))
        _after.cache_clear()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
