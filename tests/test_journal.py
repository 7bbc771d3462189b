"""The journal's reading side: file states (a write cut short at any byte is recognised,
an edit is not), recovery decisions, and the tree lock between nested and sibling trees."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from runnercheck.cli import main
from runnercheck.files import JOURNAL_NAME
from runnercheck.writes import journal as jr
from runnercheck.writes.treelock import LockBusy, TreeLock, locked


def entry(old: bytes | None, new: bytes) -> jr.Entry:
    return jr.Entry(Path("/x/a.py"), "G", old, new)


def test_every_cut_short_write_is_partial_and_an_edit_is_not() -> None:
    rng = random.Random(3)
    for _ in range(50):
        old = bytes(rng.choice(b"abc\n") for _ in range(rng.randint(0, 60)))
        new = bytes(rng.choice(b"abd\n") for _ in range(rng.randint(1, 60)))
        if old == new:
            continue
        item = entry(old, new)
        for k in range(len(new) + 1):  # writing new over old, stopped after k bytes
            cut = new[:k] + old[k:]
            assert jr.classify(item, cut, "start") in ("partial", "old", "new")
        for k in range(len(old) + 1):  # putting old back over new, stopped after k bytes
            cut = old[:k] + new[k:]
            assert jr.classify(item, cut, "undo") in ("partial", "old", "new")
        edited = new + b"# an edit\n"
        assert jr.classify(item, edited, "start") == "changed"
        # a file the run had not started, or had finished, cannot be cut short
        if new[:1] + old[1:] not in (old, new):
            assert jr.classify(item, new[:1] + old[1:], None) == "changed"
            assert jr.classify(item, new[:1] + old[1:], "done") == "changed"
    created = entry(None, b"print(1)\n")
    assert jr.classify(created, None) == "old"
    assert jr.classify(created, b"prin", "start") == "partial"
    assert jr.classify(created, b"print(1)\n") == "new"


def journal_of(tmp_path: Path, steps: dict[int, str]) -> jr.Journal:
    paths = [tmp_path / name for name in ("a.py", "b.py", "c.py")]
    found = jr.Journal(tmp_path, tmp_path / "journal")
    for path in paths:
        path.write_bytes(b"old " + path.name.encode())
        found.entries.append(jr.Entry(path, "G", path.read_bytes(), b"new " + path.name.encode()))
    found.steps = steps
    return found


def test_recovery_decisions(tmp_path: Path) -> None:
    found = journal_of(tmp_path, {0: "done", 1: "start"})
    a, b, c = (e.path for e in found.entries)
    a.write_bytes(b"new a.py")
    assert jr.decide(found, "G") == ("back", "")  # nothing edited: back
    c.write_bytes(b"old c.py # edited")  # not started: its edit survives a roll back
    assert jr.decide(found, "G") == ("back", "")
    c.write_bytes(b"old c.py")
    a.write_bytes(b"new a.py # edited")  # finished, then edited: forward keeps the edit
    assert jr.decide(found, "G") == ("forward", "")
    b.write_bytes(b"new b.py # appended")  # being written, then an edit on its new contents
    assert jr.decide(found, "G") == ("forward", "")
    b.write_bytes(b"new b # edited")  # being written, cut short, then edited: a person
    decision, why = jr.decide(found, "G")
    assert decision == "person" and "b.py" in why
    b.write_bytes(b"new b.py")
    c.write_bytes(b"old c.py # edited")  # edits from new (a.py) and from old (c.py)
    assert jr.decide(found, "G")[0] == "person"


def test_the_lock_excludes_nested_trees_but_not_siblings(tmp_path: Path) -> None:
    parent = tmp_path / "tree"
    child = parent / "sub"
    sibling = tmp_path / "other"
    child.mkdir(parents=True)
    sibling.mkdir()
    with TreeLock(parent):
        assert locked(parent)
        with pytest.raises(LockBusy, match="another `runnercheck migrate`"):
            TreeLock(child, timeout=0.2).acquire()
        with TreeLock(sibling, timeout=0.2):
            pass
    assert not locked(parent)
    with TreeLock(child), pytest.raises(LockBusy):
        TreeLock(parent, timeout=0.2).acquire()


# ------------------------------------------------------------------ crafted journals
# A repository can ship a journal. Each one below is crafted to make recovery write,
# create, delete, append or read outside the tree, or to crash a reader; every command
# that reads journals must report it in one line, leave it where it is and touch
# nothing outside the tree.

VICTIM = b"# a file outside the tree\n"


def _blob_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def craft(
    tree: Path,
    entries: list[dict[str, Any]],
    blobs: dict[str, bytes],
    *,
    progress: str = "",
    top: dict[str, Any] | None = None,
    raw: bytes | None = None,
) -> Path:
    """Write a journal into ``tree`` the way ``migrate`` does, with the given entries."""
    directory = tree / JOURNAL_NAME
    (directory / "old").mkdir(parents=True)
    (directory / "new").mkdir()
    for name, data in blobs.items():
        (directory / name).write_bytes(data)
    (directory / "progress").write_text(progress)
    manifest = {"format": jr.FORMAT, "version": jr.VERSION, "pid": 4242, "started": "now"}
    manifest.update(top or {})
    manifest["entries"] = entries
    (directory / "manifest.json").write_bytes(
        raw if raw is not None else json.dumps(manifest).encode()
    )
    return directory


def item(
    path: str, old: bytes | None, new: bytes, index: int = 0, mode: Any = 0o644
) -> dict[str, Any]:
    return {
        "path": path,
        "group": "Worker + ModelRunner",
        "old": None if old is None else f"old/{index}",
        "new": f"new/{index}",
        "mode": None if old is None else mode,
        "old_sha256": None if old is None else _blob_sha(old),
        "new_sha256": _blob_sha(new),
    }


def blobs_of(old: bytes | None, new: bytes, index: int = 0) -> dict[str, bytes]:
    out = {f"new/{index}": new}
    if old is not None:
        out[f"old/{index}"] = old
    return out


def fingerprint(top: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry below ``top``: its mode and contents (or link target)."""
    out: dict[str, tuple[int, bytes | str]] = {}
    for path in sorted(top.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            out[str(path)] = (info.st_mode, os.readlink(path))
        elif path.is_file() and info.st_size > 1 << 20:  # the sparse blob: never read
            out[str(path)] = (info.st_mode, f"{info.st_size} {info.st_mtime_ns}")
        elif path.is_file():
            out[str(path)] = (info.st_mode, hashlib.sha256(path.read_bytes()).hexdigest().encode())
        else:
            out[str(path)] = (info.st_mode, "")
    return out


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    outside = tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (tree / "a.py").write_bytes(b"x = 1\n")
    (outside / "victim.py").write_bytes(VICTIM)
    os.chmod(outside / "victim.py", 0o644)
    (outside / "log").write_bytes(b"")
    os.symlink(outside, tree / "lnk")
    return tree, outside


def _commands(tree: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, int, str]]:
    runs = []
    for argv in (["check"], ["migrate", "--check"], ["migrate", "--recover"], ["migrate"]):
        code = main([*argv, str(tree)])
        captured = capsys.readouterr()
        runs.append((" ".join(argv), code, captured.out + captured.err))
    return runs


def _crafted(tree: Path, outside: Path, case: str) -> Path:
    half = b"x = 1\n"  # a.py holds it: the file is "new" if the journal says so
    if case == "overwrite via a directory link":
        return craft(tree, [item("lnk/victim.py", b"evil\n", VICTIM)], blobs_of(b"evil\n", VICTIM))
    if case == "create outside":
        entries = [item("a.py", b"x = 0\n", half), item("lnk/planted.pth", None, b"import os\n", 1)]
        blobs = {**blobs_of(b"x = 0\n", half), **blobs_of(None, b"import os\n", 1)}
        (tree / "a.py").write_bytes(half + b"# edited after\n")
        return craft(tree, entries, blobs, progress="done 0\n")
    if case == "delete outside":
        return craft(tree, [item("lnk/victim.py", None, VICTIM)], blobs_of(None, VICTIM))
    if case == "absolute path":
        path = str(outside / "victim.py")
        return craft(tree, [item(path, b"evil\n", VICTIM)], blobs_of(b"evil\n", VICTIM))
    if case == "dot-dot path":
        path = "../outside/victim.py"
        return craft(tree, [item(path, b"evil\n", VICTIM)], blobs_of(b"evil\n", VICTIM))
    if case in ("foreign journal at the root", "foreign journal below"):
        foreign = outside / "elsewhere"
        foreign.mkdir()
        (foreign / "victim.py").write_bytes(VICTIM)
        craft(foreign, [item("victim.py", b"evil\n", VICTIM)], blobs_of(b"evil\n", VICTIM))
        holder = tree if case.endswith("root") else tree / "sub"
        holder.mkdir(exist_ok=True)
        os.symlink(foreign / JOURNAL_NAME, holder / JOURNAL_NAME)
        return holder / JOURNAL_NAME
    if case == "progress is a link":
        directory = craft(tree, [item("a.py", b"x = 0\n", half)], blobs_of(b"x = 0\n", half))
        (directory / "progress").unlink()
        os.symlink(outside / "log", directory / "progress")
        return directory
    if case == "progress is a directory":
        directory = craft(tree, [item("a.py", b"x = 0\n", half)], blobs_of(b"x = 0\n", half))
        (directory / "progress").unlink()
        (directory / "progress").mkdir()
        return directory
    if case == "blob is a link":
        (outside / "secret.py").write_bytes(b"secret = 1\n")
        entries = [item("a.py", half, b"secret = 1\n")]
        directory = craft(tree, entries, {"old/0": half})
        os.symlink(outside / "secret.py", directory / "new" / "0")
        (tree / "a.py").write_bytes(b"secret")  # a write of the new contents cut short
        return directory
    if case == "blob directory is a link":
        (outside / "new").mkdir()
        (outside / "new" / "0").write_bytes(b"secret = 1\n")
        directory = craft(tree, [item("a.py", half, b"secret = 1\n")], {"old/0": half})
        (directory / "new").rmdir()
        os.symlink(outside / "new", directory / "new")
        return directory
    if case.startswith("mode "):
        mode = {"mode 6777": 0o6777, "mode -1": -1, "mode 0": 0, "mode 10**30": 10**30}[case]
        return craft(tree, [item("a.py", b"x = 0\n", half, mode=mode)], blobs_of(b"x = 0\n", half))
    if case == "pid 1e999":
        raw = json.dumps(
            {
                "format": jr.FORMAT,
                "version": 1,
                "pid": 0,
                "started": "now",
                "entries": [item("a.py", b"x = 0\n", half)],
            }
        ).encode()
        return craft(
            tree, [], blobs_of(b"x = 0\n", half), raw=raw.replace(b'"pid": 0', b'"pid": 1e999')
        )
    if case == "NUL in a path":
        return craft(tree, [item("a\0.py", b"x = 0\n", half)], blobs_of(b"x = 0\n", half))
    if case == "200k-deep manifest":
        return craft(tree, [], {}, raw=b"[" * 200_000 + b"]" * 200_000)
    if case == "huge sparse blob":
        directory = craft(tree, [item("a.py", b"x = 0\n", half)], blobs_of(b"x = 0\n", half))
        with open(directory / "new" / "0", "r+b") as handle:
            handle.truncate(3 << 30)
        return directory
    raise AssertionError(case)


CASES = [
    "overwrite via a directory link",
    "create outside",
    "delete outside",
    "absolute path",
    "dot-dot path",
    "foreign journal at the root",
    "foreign journal below",
    "progress is a link",
    "progress is a directory",
    "blob is a link",
    "blob directory is a link",
    "mode 6777",
    "mode -1",
    "mode 0",
    "mode 10**30",
    "pid 1e999",
    "NUL in a path",
    "200k-deep manifest",
    "huge sparse blob",
]


@pytest.mark.parametrize("case", CASES)
def test_a_crafted_journal_is_reported_left_alone_and_touches_nothing_outside(
    case: str, world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tree, outside = world
    directory = _crafted(tree, outside, case)
    before_outside = fingerprint(outside)
    before_tree = fingerprint(tree)
    for command, code, text in _commands(tree, capsys):
        assert "Traceback" not in text, (command, text)
        lines = [line for line in text.splitlines() if "migrate journal left alone" in line]
        assert len(lines) == 1, (command, text)
        assert str(JOURNAL_NAME) in lines[0]
        expected = 1 if command in ("check", "migrate --check") else 2
        assert code == expected, (command, code, text)
        assert fingerprint(outside) == before_outside, command
        assert fingerprint(tree) == before_tree, command  # left alone: journal included
    assert os.path.lexists(directory)


def test_a_journal_crafted_the_same_way_but_honest_is_recovered(
    world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The crafting above writes journals that migrate accepts: only the tampering in
    each case makes them fail."""
    tree, _ = world
    (tree / "b.py").write_bytes(b"y = 0\n")
    entries = [
        item("a.py", b"x = 0\n", b"x = 1\n", mode=0o640),
        item("b.py", b"y = 0\n", b"y = 1\n", 1),
    ]
    blobs = {**blobs_of(b"x = 0\n", b"x = 1\n"), **blobs_of(b"y = 0\n", b"y = 1\n", 1)}
    craft(tree, entries, blobs, progress="start 0\ndone 0\n")
    os.chmod(tree / "a.py", 0o640 | 0o200)
    assert main(["check", str(tree)]) == 1
    assert "RC003" in capsys.readouterr().out
    assert main(["migrate", "--recover", str(tree)]) == 0
    assert "recovered" in capsys.readouterr().out
    assert (tree / "a.py").read_bytes() == b"x = 0\n"
    assert not (tree / JOURNAL_NAME).exists()


# ------------------------------------------------------------------ mixed groups
ENGINE = Path(__file__).parent / "migrate" / "fixtures" / "engine"


def _codes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("stale", ["worker.py", "runners"])
def test_a_group_at_two_stages_is_half_applied_without_a_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stale: str
) -> None:
    """An editor saves a buffer it read before ``migrate`` ran: the worker old and its
    runners new (or the reverse). No journal says anything; the code does."""
    tree = tmp_path / "engine"
    shutil.copytree(ENGINE / "after", tree)
    for name in ("check", "migrate"):  # a consistent tree: no RC003, no MIG007
        argv = [name, str(tree)] if name == "check" else [name, "--check", str(tree)]
        code, text = _codes(argv, capsys)
        assert "RC003" not in text and "MIG007" not in text, text
    if stale == "worker.py":
        shutil.copy(ENGINE / "before" / "worker.py", tree / "worker.py")
        expected = "Worker (legacy) calls `self.model_runner.execute_model`"
    else:
        for name in ("model_runner.py", "pooling_model_runner.py"):
            shutil.copy(ENGINE / "before" / name, tree / name)
        expected = "Worker (migrated) calls `self.model_runner.prepare_model_input`"
    assert not (tree / JOURNAL_NAME).exists()
    code, text = _codes(["check", str(tree)], capsys)
    assert code == 1
    found = [line for line in text.splitlines() if " RC003 " in line]
    assert found and all(line.startswith(f"{tree / 'worker.py'}:") for line in found), text
    assert expected in found[0]
    code, text = _codes(["migrate", "--check", str(tree)], capsys)
    assert code == 1
    assert any("MIG007" in line and expected in line for line in text.splitlines()), text
