"""Finishing what an interrupted ``runnercheck migrate`` left behind.

A journal that is still there after its run ended (``kill -9``, a power loss) is
recovered group by group, under the tree lock, by the next ``runnercheck migrate``
(before it plans) or by ``runnercheck migrate --recover``:

- **back** (the rule): every file of the group gets its old contents back, byte for
  byte, and its mode; a file the run created is removed. The run that recovers then
  plans again from a consistent tree and writes the group anew, re-verified: the
  journal's new contents were checked against the old tree only.
- **forward**, only when the files edited after the crash were edited from their new
  contents (the run had finished writing them, or an edit was appended to the new
  contents): the edits are kept and the group's other files get their new contents
  (they still hold exactly the old contents or a cut-short write, so the plan holds).
- a **person** decides when an edit was made on a write cut short, or when edits from
  old and from new contents meet in one group: nothing is touched, the journal stays
  (its ``old/`` and ``new/`` hold every version) and the run stops with one line.

An edited file is never written by recovery: only the other files of its group are.
What the run had written comes from the journal's progress log
(:func:`runnercheck.writes.journal.decide`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from runnercheck.errors import RunnerCheckError
from runnercheck.files import JOURNAL_NAME, within_roots
from runnercheck.writes import journal as jr
from runnercheck.writes.beneath import READ, Escaped, Tree
from runnercheck.writes.checkpoints import deferred_signals
from runnercheck.writes.journal_files import Progress, remove_stale, retire
from runnercheck.writes.treelock import TreeLock, tree_root
from runnercheck.writes.write import Conflict, create, remove_created, replace_contents


class Unrecoverable(RunnerCheckError):
    """An interrupted run left files that a person has to put right."""


def shown(path: Path) -> str:
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _ours(entry: jr.Entry, wanted: tuple[str, ...]) -> Callable[[bytes], bool]:
    def accept(current: bytes) -> bool:
        return jr.classify(entry, current) in wanted

    return accept


def put_back(tree: Tree, entry: jr.Entry) -> None:
    """Give a file that holds the new contents (or a write cut short) its old ones."""
    if entry.old is None:
        if not remove_created(tree, entry.path, entry.new):
            raise Conflict("was edited since")
        return
    limit = max(len(entry.old), len(entry.new)) + 1
    replace_contents(tree, entry.path, _ours(entry, ("new", "partial")), entry.old, limit, True)


def _put_forward(tree: Tree, entry: jr.Entry) -> None:
    """Give a file that holds the old contents (or a write cut short) its new ones."""
    if entry.old is None and not tree.exists(entry.path):
        create(tree, entry.path, entry.new)
        return
    limit = max(len(entry.old or b""), len(entry.new)) + 1
    replace_contents(tree, entry.path, _ours(entry, ("old", "partial")), entry.new, limit, True)


def _restore_mode(tree: Tree, entry: jr.Entry) -> None:
    """Take back the owner's write bit that ``--force`` added for the write, and nothing
    else: a journal can only ever remove that one bit, never add one."""
    if entry.mode is None:
        return
    try:
        with tree.parent(entry.path) as (directory, name):
            fd = os.open(name, READ, dir_fd=directory)
    except (OSError, Escaped):
        return
    try:
        now = os.fstat(fd)
        if stat.S_ISREG(now.st_mode) and stat.S_IMODE(now.st_mode) == entry.mode | stat.S_IWUSR:
            if entry.mode != stat.S_IMODE(now.st_mode):
                os.fchmod(fd, entry.mode)
    except OSError:
        pass
    finally:
        os.close(fd)


def _tampered(tree: Tree, found: jr.Journal) -> str:
    """Why recovery may not write the files ``found`` lists (``""`` when it may): a file
    with other hard links, or a path through a link."""
    for entry in found.entries:
        try:
            info = tree.lstat(entry.path)
        except FileNotFoundError:
            continue
        except (OSError, Escaped) as exc:
            return f"{shown(entry.path)}: {exc}"
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            return f"{shown(entry.path)} has {info.st_nlink} hard links, which migrate never writes"
    return ""


def recover_journal(found: jr.Journal) -> str:
    """Recover one journal (see the module docstring); the line to print.

    :class:`Unrecoverable` when a person must decide (nothing is touched then)."""
    where = shown(found.directory)
    run = f"an interrupted `runnercheck migrate` (pid {found.pid}, at {found.started})"
    group_names = list(dict.fromkeys(entry.group for entry in found.entries))
    decisions = {name: jr.decide(found, name) for name in group_names}
    for name, (decision, why) in decisions.items():
        if decision == "person":
            raise Unrecoverable(
                f"{where}: {run} left {name} half-applied and {why}: nothing was touched; "
                f"every version is in {where}/old and {where}/new ({jr.MANIFEST} says which "
                "file is which); put the files right, then delete that directory"
            )
    try:
        tree = Tree(found.root)
    except (OSError, Escaped) as exc:
        raise Unrecoverable(f"{where}: cannot open its tree ({exc}): nothing was touched") from None
    with tree:
        return _recover_in(tree, found, decisions)


def _recover_in(
    tree: Tree, found: jr.Journal, decisions: dict[str, tuple[jr.Decision, str]]
) -> str:
    where = shown(found.directory)
    run = f"an interrupted `runnercheck migrate` (pid {found.pid}, at {found.started})"
    tampered = _tampered(tree, found)
    if tampered:
        raise Unrecoverable(
            f"{where}: a journal that lists {tampered} is not trusted: nothing was touched; "
            f"if it is not the journal of an interrupted run of yours, delete {where}"
        )
    states = [jr.state(found, index) for index in range(len(found.entries))]
    mixed = [g for g in jr.groups(found) if g.mixed]
    try:
        progress = Progress(tree, found.directory)
    except OSError as exc:
        raise Unrecoverable(
            f"{where}: cannot log the recovery of {run} ({exc.strerror or exc}): nothing was "
            "touched"
        ) from None
    try:
        for index, entry in enumerate(found.entries):
            decision = decisions[entry.group][0]
            try:
                if decision == "back" and states[index] in ("new", "partial"):
                    progress.record("undo", index)
                    put_back(tree, entry)
                    progress.record("undone", index)
                elif decision == "forward" and states[index] in ("old", "partial"):
                    progress.record("start", index)
                    _put_forward(tree, entry)
                    progress.record("done", index)
            except (Conflict, Escaped, OSError) as exc:
                raise Unrecoverable(
                    f"{shown(entry.path)}: cannot recover {run} ({exc}); every version is "
                    f"in {where}/old and {where}/new (see {jr.MANIFEST})"
                ) from None
            _restore_mode(tree, entry)
    finally:
        progress.close()
    retire(tree, found.directory)
    if not mixed and all(s == "old" for s in states):
        return f"{where}: removed the journal of {run}; it had written nothing"
    done = []
    for group in mixed or jr.groups(found):
        how = "forward to its new contents" if decisions[group.group][0] == "forward" else "back"
        done.append(f"{group.group} was half-applied ({group.describe(found.root)}): rolled {how}")
    return f"{where}: recovered {run}: " + "; ".join(done)


def recover_all(tree: Path, roots: Sequence[Path], met: Iterable[Path]) -> list[str]:
    """Under ``tree``'s lock: recover every journal in, below or above ``tree``.

    A journal above it is recovered only when its files lie inside ``roots``."""
    lines = _remove_stale(tree)
    for directory in jr.find([tree], met):
        try:
            found = jr.load(directory)
        except jr.JournalError as exc:
            raise Unrecoverable(
                f"{exc}; if it is not the journal of an interrupted run of yours, delete "
                f"{shown(directory)}"
            ) from None
        owner = directory.parent
        if owner != tree and owner in tree.parents:
            outside = [e.path for e in found.entries if not within_roots(e.path, roots)]
            if outside:
                raise Unrecoverable(
                    f"{shown(directory)}: {shown(owner)} holds the journal of an interrupted "
                    f"`runnercheck migrate` with files outside the given paths (e.g. "
                    f"{shown(outside[0])}): run `runnercheck migrate --recover {shown(owner)}`"
                )
        if owner != tree:
            lines += _remove_stale(owner)
        lines.append(recover_journal(found))
    return lines


def _remove_stale(root: Path) -> list[str]:
    """What a ``kill -9`` left in ``root`` (see :func:`remove_stale`), removed."""
    try:
        with Tree(root) as tree:
            return remove_stale(tree)
    except (OSError, Escaped) as exc:
        return [f"{shown(root)}: left as it is ({exc})"]


def recover(
    roots: Sequence[Path], met: Iterable[Path] = (), lock_timeout: float = 30.0
) -> list[str]:
    """Recover whatever interrupted runs left under (or above) ``roots``; one line per
    journal. :class:`Unrecoverable` when a person must decide."""
    tree = tree_root(roots)
    met = list(met)
    if not jr.find([tree], met) and not _staging_left(tree):
        return []  # nothing to do: no lock taken (the tree may be read-only to us)
    with deferred_signals(), TreeLock(tree, lock_timeout):
        return recover_all(tree, roots, met)


def _staging_left(tree: Path) -> bool:
    try:
        return any(name.startswith(JOURNAL_NAME + ".") for name in os.listdir(tree))
    except OSError:
        return False
