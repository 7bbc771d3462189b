"""The journal's reading side: file states (a write cut short at any byte is recognised,
an edit is not), recovery decisions, and the tree lock between nested and sibling trees."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from runnercheck import journal as jr
from runnercheck.treelock import LockBusy, TreeLock, locked


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
