"""Nothing is written outside the tree: a directory swapped during the run, a linked
facts cache, hard links, planted journal names, a journal of huge sparse blobs and
special files in the cache. Each attack runs against the real command; the directory
beside the tree is fingerprinted before and after, and must not change."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runnercheck.cli import main
from runnercheck.files import JOURNAL_NAME
from runnercheck.workspace.cache import CACHE_DIR, FACTS_DIR
from runnercheck.writes import checkpoints
from runnercheck.writes import journal as jr
from tests.migrate.conftest import FIXTURES, snapshot
from tests.stress.attacks import make_nested_plan
from tests.stress.harness import ROOT, Plan, runs

BEFORE = FIXTURES / "engine" / "before"
AFTER = FIXTURES / "engine" / "after"


def fingerprint(root: Path) -> dict[str, tuple[str, str]]:
    """Every name under ``root`` with its kind and contents (or link target), links not
    followed: what any write, create, rename or delete there would change."""
    found: dict[str, tuple[str, str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                found[relative] = ("dir", "")
            elif path.is_file():
                found[relative] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                found[relative] = ("special", "")
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the tree, holding a copy of the engine."""
    place = tmp_path / "outside"
    shutil.copytree(BEFORE, place / "worker")
    return place


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``project/pkg/worker/`` holds the engine in its old shape."""
    root = tmp_path / "project"
    shutil.copytree(BEFORE, root / "pkg" / "worker")
    (root / "pyproject.toml").write_text("[tool.runnercheck]\n")
    return root


def cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture
def at_checkpoint() -> Iterator[dict[str, object]]:
    """Set ``["name"]`` and ``["do"]``: ``do()`` runs once, at the first checkpoint of
    that name."""
    wanted: dict[str, object] = {}

    def hook(name: str) -> None:
        action = wanted.get("do")
        if name == wanted.get("name") and callable(action):
            wanted["do"] = None
            action()

    checkpoints.hook = hook
    yield wanted
    checkpoints.hook = None


@pytest.mark.parametrize("swap", ["link", "directory"])
def test_a_directory_swapped_once_the_journal_exists_is_not_written_through(
    project: Path,
    outside: Path,
    at_checkpoint: dict[str, object],
    swap: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker = project / "pkg" / "worker"
    before_outside = fingerprint(outside)
    away = project / "pkg" / "worker.away"

    def attack() -> None:
        assert (project / "pkg" / JOURNAL_NAME).is_dir()
        worker.rename(away)
        if swap == "link":
            worker.symlink_to(outside / "worker")
        else:  # a copy moved into its place: another directory, not the one met
            shutil.copytree(outside / "worker", project / "copy")
            (project / "copy").rename(worker)

    at_checkpoint.update(name="journal-written", do=attack)
    code = main(["migrate", str(project / "pkg")])
    out = capsys.readouterr().out
    assert at_checkpoint["do"] is None, "the attack ran"
    assert code == 1
    assert "MIG003" in out and "Traceback" not in out
    assert fingerprint(outside) == before_outside
    assert snapshot(away) == snapshot(BEFORE)  # the real files: never half-written
    assert not (project / "pkg" / JOURNAL_NAME).exists()


@pytest.mark.parametrize("linked", [CACHE_DIR, f"{CACHE_DIR}/{FACTS_DIR}"])
def test_a_linked_facts_cache_is_not_used(project: Path, outside: Path, linked: str) -> None:
    target = outside / "cache"
    target.mkdir()
    place = project / linked
    place.parent.mkdir(exist_ok=True)
    place.symlink_to(target)
    before = fingerprint(outside)
    checked = cli(project, "check", "pkg")
    assert checked.returncode in (0, 1), checked.stderr
    assert f"{linked} is a symbolic link: the facts cache is not used" in checked.stderr
    assert "Traceback" not in checked.stderr + checked.stdout
    would = cli(project, "migrate", "--check", "pkg")
    assert would.returncode == 1 and "Traceback" not in would.stderr + would.stdout
    assert "the facts cache is not used" in would.stdout + would.stderr
    assert fingerprint(outside) == before


@pytest.mark.parametrize("special", ["fifo", "dev-zero"])
def test_special_files_in_the_facts_cache_never_hang_check(project: Path, special: str) -> None:
    first = cli(project, "check", "pkg")
    assert first.returncode in (0, 1), first.stderr
    facts = project / CACHE_DIR / FACTS_DIR
    entries = [p for p in facts.iterdir() if not p.name.startswith(".")]
    assert entries, "the first run filled the cache"
    for entry in entries:
        entry.unlink()
        if special == "fifo":
            os.mkfifo(entry)
        else:
            entry.symlink_to("/dev/zero")
    again = cli(project, "check", "pkg", timeout=60)  # a blocking read is the hang
    assert again.returncode == first.returncode
    assert again.stdout == first.stdout
    assert "the facts cache is not used" in again.stderr
    assert len([line for line in again.stderr.splitlines() if "facts cache" in line]) == 1


@pytest.mark.slow
def test_a_hard_linked_file_is_refused_unless_replacing_is_asked_for(
    project: Path, outside: Path
) -> None:
    worker = project / "pkg" / "worker" / "worker.py"
    twin = outside / "worker-twin.py"
    os.link(worker, twin)
    before = fingerprint(outside)
    tree_before = snapshot(project / "pkg")
    refused = cli(project, "migrate", "pkg")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "MIG003" in refused.stdout and "has 2 hard links" in refused.stdout
    assert fingerprint(outside) == before
    assert snapshot(project / "pkg") == tree_before
    replaced = cli(project, "migrate", "--replace-hard-links", "pkg")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert fingerprint(outside) == before  # the other name keeps the old contents
    assert worker.read_bytes() == (AFTER / "worker.py").read_bytes()
    assert worker.stat().st_nlink == 1


def test_recovery_never_writes_a_journal_into_a_hard_link(project: Path, outside: Path) -> None:
    pkg = project / "pkg"
    secret = outside / "secret.txt"
    secret.write_bytes(b"outside contents\n")
    os.link(secret, pkg / "hl.py")
    before = fingerprint(outside)
    _plant_journal(pkg, "hl.py", old=b"planted bytes\n", new=secret.read_bytes())
    recovered = cli(project, "migrate", "--recover", "pkg")
    assert recovered.returncode == 2, recovered.stdout + recovered.stderr
    lines = (recovered.stdout + recovered.stderr).strip().splitlines()
    assert len(lines) == 1 and "2 hard links" in lines[0] and "not trusted" in lines[0]
    assert fingerprint(outside) == before
    assert (pkg / JOURNAL_NAME).is_dir()  # left for a person


def _plant_journal(tree: Path, name: str, old: bytes, new: bytes, blobs: int = 1) -> None:
    """A journal as ``migrate`` writes it, rolling ``name`` back from ``new`` to ``old``
    (``blobs`` files listed, the others made up)."""
    journal = tree / JOURNAL_NAME
    (journal / "old").mkdir(parents=True)
    (journal / "new").mkdir()
    entries = []
    for index in range(blobs):
        (journal / "old" / str(index)).write_bytes(old)
        (journal / "new" / str(index)).write_bytes(new)
        entries.append(
            {
                "path": name if index == 0 else f"made-up-{index}.py",
                "group": "g",
                "old": f"old/{index}",
                "new": f"new/{index}",
                "mode": 0o644,
                "old_sha256": jr.digest(old),
                "new_sha256": jr.digest(new),
            }
        )
    manifest = {
        "format": jr.FORMAT,
        "version": jr.VERSION,
        "pid": 12345,
        "started": "2026-01-01T00:00:00",
        "entries": entries,
    }
    (journal / jr.MANIFEST).write_text(json.dumps(manifest))
    (journal / jr.PROGRESS).write_text("done 0\n")


def test_planted_retired_journal_names_are_left_alone(project: Path, outside: Path) -> None:
    pkg = project / "pkg"
    pid = os.getpid()
    for offset in range(400):  # the pids the next runs are likely to get
        (pkg / f"{JOURNAL_NAME}.{pid + offset}.done").symlink_to(outside)
        (pkg / f"{JOURNAL_NAME}.{pid + offset}.new").symlink_to(outside)
    before = fingerprint(outside)
    migrated = cli(project, "migrate", "pkg")
    text = migrated.stdout + migrated.stderr
    assert migrated.returncode == 0, text
    assert "Traceback" not in text
    assert re.search(rf"{re.escape(JOURNAL_NAME)}\.\d+\.(done|new) is a symbolic link", text)
    assert "and 797 more names like these beside the journal: left alone" in text
    assert snapshot(pkg / "worker") == snapshot(AFTER)
    assert not (pkg / JOURNAL_NAME).exists()
    assert fingerprint(outside) == before
    assert len([p for p in pkg.iterdir() if p.is_symlink()]) == 800


def test_a_journal_of_huge_sparse_blobs_is_refused_without_reading_them(project: Path) -> None:
    pkg = project / "pkg"
    _plant_journal(pkg, "worker/worker.py", old=b"x", new=b"y", blobs=20)
    for kind in ("old", "new"):
        for index in range(20):
            with open(pkg / JOURNAL_NAME / kind / str(index), "r+b") as blob:
                blob.truncate(60 * 1024 * 1024)  # sparse: 60 MiB each, nothing on disk
    # the peak is read by a fresh interpreter around the command: a child forked from
    # this (large) test process would count the parent's pages it shares until exec
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(done.stdout + done.stderr)\n"
        "print('peak', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "runnercheck", "check", "pkg"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    text = done.stdout
    peak = int(text.rsplit("peak", 1)[1])
    assert "Traceback" not in text + done.stderr
    assert f"more than {jr.JOURNAL_LIMIT} bytes in all" in text
    assert peak < 400 * 1024, f"check reached {peak} KiB: {text}"


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return make_nested_plan(BEFORE, tmp_path_factory.mktemp("attacks").resolve() / "tree")


@pytest.mark.slow
def test_racing_swaps_and_planted_links_in_turn(nested: Plan) -> None:
    """The soak's ``race`` and ``links`` kinds, a few runs of each (the soak runs more)."""
    tally = runs(nested, 8, seed=7, kinds=("race", "links"), nested=nested)
    assert tally.runs == 8 and tally.kinds == {"race": 4, "links": 4}
    assert tally.failures == [], tally.failures
    assert (tally.outside_writes, tally.tracebacks, tally.lost_edits) == (0, 0, 0)
