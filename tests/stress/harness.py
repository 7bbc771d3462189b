"""Randomized kill/edit runs of ``migrate``'s writes, and what each must leave.

A run starts from a copy of a tree in its old shape. A writer process commits the
tree's planned change set (``runnercheck.writes.transaction.commit``, or the whole ``runnercheck
migrate`` command in ``cli`` runs) and is killed with SIGKILL: at a random checkpoint
(``RUNNERCHECK_FAULT=kill:N``), or after a random delay. Meanwhile an editor may
append a line to a random file of the change set at a random moment, as a person
saving in an editor would. Then ``runnercheck migrate --recover`` runs, and the run
checks, with the edit taken out of the file it went into:

- no lost edit: the appended line is in its file;
- every unit (a worker/runner group, with the groups that share a file) is entirely
  old or entirely new, never mixed, and every file is byte for byte its old or new
  contents;
- nothing is left behind: no journal, no staging directory.

A run whose recovery needs a person (see :mod:`runnercheck.writes.recovery`) is counted apart;
it must still have lost nothing and kept the journal.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from codemods.framework.source import collect
from runnercheck.errors import RunnerCheckError
from runnercheck.files import JOURNAL_NAME
from runnercheck.records import Change
from runnercheck.writes import checkpoints
from runnercheck.writes.recovery import Unrecoverable, recover
from runnercheck.writes.transaction import commit, units

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Plan:
    root: Path
    changes: list[Change]
    units: list[list[Path]]
    #: Files under ``root`` before the migration (relative path -> bytes).
    before: dict[str, bytes]
    checkpoints: int = 0
    seconds: float = 0.0
    #: How long one whole ``runnercheck migrate`` takes (for ``cli`` runs).
    cli_seconds: float = 4.0

    def existing(self, unit: int = 0) -> list[Path]:
        """The files of a unit, in the order they are written, that exist before the
        migration (the unit may also create files)."""
        old = {c.path for c in self.changes if c.old is not None}
        return [path for path in self.units[unit] if path in old]


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def reset(plan: Plan) -> None:
    """Put the tree back to its old shape, byte for byte, with nothing else in it."""
    _clear(plan.root, plan.root, plan.before)
    for name, data in plan.before.items():
        (plan.root / name).parent.mkdir(parents=True, exist_ok=True)
        (plan.root / name).write_bytes(data)


def _clear(root: Path, directory: Path, before: dict[str, bytes]) -> None:
    """Remove what ``before`` does not hold under ``directory``; break hard links."""
    for entry in os.listdir(directory):
        path = directory / entry
        relative = str(path.relative_to(root))
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            if entry != "__pycache__" and any(n.startswith(relative + "/") for n in before):
                _clear(root, path, before)
            else:
                shutil.rmtree(path)
        elif relative not in before or path.stat().st_nlink > 1:
            path.unlink()


def make_plan(source: Path, work: Path, copy: bool = True) -> Plan:
    """Copy ``source`` to ``work`` (unless ``copy`` is false: ``work`` is ``source``) and
    plan its migration (one real commit is timed and its checkpoints counted, then the
    tree is reset)."""
    from codemods.framework.pipeline import migrate

    if copy:
        shutil.copytree(source, work, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = migrate([str(work)])
    changes = list(result.changes.values())
    plan = Plan(work, changes, [[c.path for c in u] for u in units(changes)], snapshot(work))
    seen: list[str] = []
    checkpoints.hook = seen.append
    try:
        started = time.perf_counter()
        outcome = commit(changes, [work])
        plan.seconds = time.perf_counter() - started
    finally:
        checkpoints.hook = None
    assert not outcome.refused, outcome.refused
    plan.checkpoints = len(seen)
    reset(plan)
    return plan


# ------------------------------------------------------------------ one run


@dataclass
class Edit:
    path: Path
    line: bytes
    done: bool = False


@dataclass
class RunResult:
    kind: str
    killed: bool
    edited: bool
    lost_edits: int = 0
    mixed_units: int = 0
    foreign_files: int = 0
    leftovers: int = 0
    person: bool = False
    recovered: bool = False
    #: The kill left a unit half-applied (before recovery).
    half_applied: bool = False
    detail: str = ""
    tracebacks: int = 0
    aborts: int = 0
    outside_writes: int = 0
    #: A wrong answer: a second run judging a write in progress, a crafted journal
    #: not reported in one line.
    wrong: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.lost_edits
            or self.mixed_units
            or self.foreign_files
            or self.leftovers
            or self.tracebacks
            or self.aborts
            or self.outside_writes
            or self.wrong
        )


def _editor(edit: Edit, delay: float) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        with open(edit.path, "ab") as handle:  # waits while the writer holds a lease
            handle.write(edit.line)
        edit.done = True

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _writer(
    plan: Plan, kind: str, fault: str, spool: Path, after_journal: str = "", fsize: int = 0
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RUNNERCHECK_FAULT": fault, "PYTHONDONTWRITEBYTECODE": "1"}
    env["RUNNERCHECK_STRESS_AFTER_JOURNAL"] = after_journal
    if kind in CLI_KINDS:
        command = [sys.executable, "-m", "runnercheck", "migrate", str(plan.root)]
    else:
        with open(spool, "wb") as handle:
            pickle.dump((plan.changes, [plan.root]), handle)
        command = [sys.executable, "-m", "tests.stress.harness", str(spool)]

    def limit() -> None:
        if fsize:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.RLIM_INFINITY))

    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, preexec_fn=limit
    )
    proc.errors = errors  # type: ignore[attr-defined]
    return proc


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    errors = proc.errors  # type: ignore[attr-defined]
    errors.seek(0)
    text = errors.read().decode("utf-8", "replace")
    errors.close()
    return text


#: Run kinds that start the whole ``runnercheck migrate`` command.
CLI_KINDS = ("cli", "sigint", "concurrent", "hostile")


def recover_cli(plan: Plan) -> tuple[int, str]:
    """``runnercheck migrate --recover`` on the tree: its status and output."""
    done = subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", "--recover", str(plan.root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def _recover(plan: Plan, cli: bool) -> tuple[int, str]:
    """``runnercheck migrate --recover`` on the tree: the command itself (``cli``), or
    the function behind it in this process (the same code, without a start-up)."""
    if cli:
        return recover_cli(plan)
    try:
        return 0, "\n".join(recover([plan.root], collect([plan.root]).journals))
    except Unrecoverable as exc:
        return 2, str(exc)
    except Exception as exc:  # counted as a traceback
        return 3, f"Traceback (in process): {type(exc).__name__}: {exc}"


def outside_of(plan: Plan) -> Path:
    """A directory beside the tree that no run may touch (hashed around every run)."""
    outside = plan.root.parent / "outside"
    if not outside.exists():
        outside.mkdir()
        (outside / "victim.py").write_bytes(b"# outside the tree\n")
    return outside


def fingerprint(top: Path) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for path in sorted(top.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            out[str(path)] = (info.st_mode, os.readlink(path))
        elif path.is_file():
            out[str(path)] = (info.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            out[str(path)] = (info.st_mode, "")
    return out


def _plant(plan: Plan, rng: random.Random) -> str:
    """A crafted journal that would write outside the tree if it were trusted."""
    outside = outside_of(plan)
    victim = (outside / "victim.py").read_bytes()
    case = rng.choice(["directory link", "foreign journal", "blob link", "mode"])
    directory = plan.root / JOURNAL_NAME
    if case == "foreign journal":
        foreign = outside / "elsewhere"
        shutil.rmtree(foreign, ignore_errors=True)
        foreign.mkdir()
        (foreign / "victim.py").write_bytes(victim)
        directory = foreign / JOURNAL_NAME
    (directory / "old").mkdir(parents=True)
    (directory / "new").mkdir()
    path, old, new, mode = "lnk/victim.py", b"evil\n", victim, 0o644
    if case == "foreign journal":
        path = "victim.py"
    elif case == "blob link":
        path, old, new = plan.changes[0].path.name, plan.before[plan.changes[0].path.name], victim
    elif case == "mode":
        path = plan.changes[0].path.name
        old = plan.before[path]
        new, mode = old + b"#\n", 0o6777
    os.symlink(outside, plan.root / "lnk")
    (directory / "old" / "0").write_bytes(old)
    if case == "blob link":
        os.symlink(outside / "victim.py", directory / "new" / "0")
    else:
        (directory / "new" / "0").write_bytes(new)
    (directory / "progress").write_bytes(b"start 0\n")
    entry = {
        "path": path,
        "group": "G",
        "old": "old/0",
        "new": "new/0",
        "mode": mode,
        "old_sha256": hashlib.sha256(old).hexdigest(),
        "new_sha256": hashlib.sha256(new).hexdigest(),
    }
    manifest = {"format": "runnercheck-migrate-journal", "version": 1, "pid": 1}
    manifest.update({"started": "then", "entries": [entry]})
    (directory / "manifest.json").write_text(json.dumps(manifest))
    if case == "foreign journal":
        os.symlink(directory, plan.root / JOURNAL_NAME)
    return case


def one_run(
    plan: Plan, rng: random.Random, kind: str, spool: Path, edit_chance: float
) -> RunResult:
    """One randomized run. ``kind``: ``checkpoint``, ``timed``, ``cli`` (killed),
    ``diskfull`` (the file size limit cuts a write or the journal short), ``sigint``
    (Ctrl-C, once or more), ``concurrent`` (two runs at once), ``hostile`` (a crafted
    journal in the tree)."""
    reset(plan)
    outside = outside_of(plan)
    planted = _plant(plan, rng) if kind == "hostile" else ""
    before_outside = fingerprint(outside)
    fault = ""
    if kind == "checkpoint":
        fault = f"kill:{rng.randint(1, plan.checkpoints)}"
    edit: Edit | None = None
    if kind != "hostile" and rng.random() < edit_chance:
        target = rng.choice([c.path for c in plan.changes if c.old is not None])
        edit = Edit(target, f"# edited during the run {rng.getrandbits(48):x}\n".encode())
    after_journal, fsize = "", 0
    if kind == "diskfull":
        largest = max(len(c.new) for c in plan.changes)
        if rng.random() < 0.3:  # the journal itself does not fit
            fsize = rng.randint(1, largest)
        else:
            after_journal = f"fsize:{rng.randint(0, largest)}"
    proc = _writer(plan, kind, fault, spool, after_journal, fsize)
    others = [_writer(plan, kind, "", spool)] if kind == "concurrent" else []
    window = plan.seconds * 1.3 + 0.01
    if kind in CLI_KINDS:
        window = plan.cli_seconds * 1.1  # planning and writing
    else:
        assert proc.stdout is not None
        proc.stdout.readline()  # "ready": imports done, the commit starts now
    editor = _editor(edit, rng.uniform(0, window)) if edit is not None else None
    if kind in ("timed", "cli"):
        try:
            proc.wait(timeout=rng.uniform(0, window))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    elif kind == "sigint":
        time.sleep(rng.uniform(0, window))
        for _ in range(rng.randint(1, 3)):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            time.sleep(rng.uniform(0, 0.05))
    texts = []
    for each in [proc, *others]:
        out, _ = each.communicate(timeout=600)
        texts.append(out.decode("utf-8", "replace") + _stderr(each))
    killed = proc.returncode == -signal.SIGKILL
    if editor is not None:
        editor.join(timeout=120)
    result = RunResult(kind, killed, edit is not None and edit.done)
    result.tracebacks = sum("Traceback" in text for text in texts)
    result.aborts = sum(each.returncode == -signal.SIGABRT for each in [proc, *others])
    if kind == "concurrent":
        result.wrong = sum("MIG108" in t or "migrate journal" in t for t in texts)
    if kind == "hostile":
        left_alone = [line for line in texts[0].splitlines() if "journal left alone" in line]
        result.wrong = int(proc.returncode != 2 or len(left_alone) != 1)
        result.outside_writes = int(fingerprint(outside) != before_outside)
        result.detail = f"{planted}: {texts[0].strip()[-300:]}"
        reset(plan)
        shutil.rmtree(outside / "elsewhere", ignore_errors=True)
        return result
    result.half_applied = _half_applied(plan, edit)
    code, text = _recover(plan, kind in CLI_KINDS)
    result.tracebacks += "Traceback" in text
    result.recovered = "recovered" in text
    result.person = code == 2 and "put the files right" in text
    result.detail = text or " | ".join(t.strip()[-300:] for t in texts)
    result.outside_writes = int(fingerprint(outside) != before_outside)
    judge(plan, edit, result)
    return result


def _half_applied(plan: Plan, edit: Edit | None) -> bool:
    """True when a unit holds old and new (or cut-short) files: what the kill left."""
    by_path = {c.path: c for c in plan.changes}
    for unit in plan.units:
        kinds = set()
        for path in unit:
            current = path.read_bytes() if path.exists() else None
            if current is not None and edit is not None and edit.done and path == edit.path:
                current = current.replace(edit.line, b"", 1)
            kinds.add("old" if current == by_path[path].old else "other")
        if len(kinds) > 1:
            return True
    return False


def judge(plan: Plan, edit: Edit | None, result: RunResult) -> None:
    by_path = {c.path: c for c in plan.changes}
    for unit in plan.units:
        kinds = set()
        for path in unit:
            change = by_path[path]
            current = path.read_bytes() if path.exists() else None
            if edit is not None and edit.done and path == edit.path:
                if current is None or edit.line not in current:
                    result.lost_edits += 1
                    continue
                current = current.replace(edit.line, b"", 1)
            if current == change.new:
                kinds.add("new")
            elif current == change.old:
                kinds.add("old")
            else:
                result.foreign_files += 1
        if len(kinds) > 1 and not result.person:
            result.mixed_units += 1
    left = [e for e in os.listdir(plan.root) if e.startswith(JOURNAL_NAME)]
    if result.person:
        if left != [JOURNAL_NAME]:
            result.leftovers += 1  # the journal must stay for the person
        result.mixed_units = result.foreign_files = 0
    elif left:
        result.leftovers += len(left)


@dataclass
class Tally:
    runs: int = 0
    killed: int = 0
    edited: int = 0
    recovered: int = 0
    half_applied: int = 0
    person: int = 0
    lost_edits: int = 0
    mixed_units: int = 0
    foreign_files: int = 0
    leftovers: int = 0
    tracebacks: int = 0
    aborts: int = 0
    outside_writes: int = 0
    wrong: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    #: What recovery said in the runs left for a person.
    persons: list[str] = field(default_factory=list)

    def add(self, result: RunResult) -> None:
        self.runs += 1
        self.kinds[result.kind] += 1
        self.killed += result.killed
        self.edited += result.edited
        self.recovered += result.recovered
        self.half_applied += result.half_applied
        self.person += result.person
        self.lost_edits += result.lost_edits
        self.mixed_units += result.mixed_units
        self.foreign_files += result.foreign_files
        self.leftovers += result.leftovers
        self.tracebacks += result.tracebacks
        self.aborts += result.aborts
        self.outside_writes += result.outside_writes
        self.wrong += result.wrong
        if not result.ok:
            self.failures.append(f"{result.kind}: {result.detail}")
        if result.person:
            self.persons.append(f"{result.kind}: {result.detail}")

    def line(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.kinds.items()))
        return (
            f"{self.runs} runs ({kinds}): {self.killed} killed, {self.edited} edited during "
            f"the run, {self.half_applied} left half-applied by the kill, {self.recovered} "
            f"recovered, {self.person} left for a person; "
            f"lost edits {self.lost_edits}, mixed groups {self.mixed_units}, files neither "
            f"old nor new {self.foreign_files}, leftovers {self.leftovers}, writes outside "
            f"the tree {self.outside_writes}, tracebacks {self.tracebacks}, aborts "
            f"{self.aborts}, wrong answers {self.wrong}"
        )


def write_with_fault(plan: Plan, fault: str) -> int:
    """Commit the plan in a writer process with ``RUNNERCHECK_FAULT=fault``; its status."""
    proc = _writer(plan, "checkpoint", fault, plan.root.parent / "plan.pickle")
    proc.communicate(timeout=300)
    return proc.returncode


def runs(
    plan: Plan,
    count: int,
    seed: int,
    kinds: tuple[str, ...],
    edit_chance: float = 0.5,
    nested: Plan | None = None,
) -> Tally:
    """``count`` runs of ``kinds`` in turn (``race`` and ``links`` run on ``nested``,
    see :mod:`tests.stress.attacks`)."""
    rng = random.Random(seed)
    tally = Tally()
    spool = plan.root.parent / "plan.pickle"
    for number in range(count):
        kind = kinds[number % len(kinds)]
        if kind in ("race", "links"):
            from tests.stress.attacks import one_attack

            assert nested is not None, f"{kind} runs need a nested plan"
            tally.add(one_attack(nested, rng, kind))
        else:
            tally.add(one_run(plan, rng, kind, spool, edit_chance))
    reset(plan)
    return tally


def fill(path: Path) -> None:
    """Fill the file system holding ``path`` until it has no byte left (ENOSPC)."""
    chunk = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                if os.write(fd, chunk) < len(chunk):
                    continue
            except OSError:
                break
        for size in (1024, 256, 64, 16, 4, 1):  # the last bytes of a block
            while True:
                try:
                    os.write(fd, chunk[:size])
                except OSError:
                    break
    finally:
        os.close(fd)


def _after_journal(fault: str) -> None:
    """At the checkpoint where the journal is complete, make the disk fill up:
    ``fsize:N`` sets RLIMIT_FSIZE to N bytes (writes past it fail with EFBIG),
    ``fill:PATH`` fills the file system holding PATH (ENOSPC)."""
    import resource

    def hook(name: str) -> None:
        if name != "journal-written":
            return
        kind, _, value = fault.partition(":")
        if kind == "fsize":
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(value), resource.RLIM_INFINITY))
        elif kind == "fill":
            fill(Path(value))

    checkpoints.hook = hook


def _child(spool: str) -> None:
    """The writer process: commit a pickled change set; prints each refusal, and an
    error in one line as the command does."""
    with open(spool, "rb") as handle:
        changes, roots = pickle.load(handle)
    fault = os.environ.get("RUNNERCHECK_STRESS_AFTER_JOURNAL", "")
    if fault:
        _after_journal(fault)
    print("ready", flush=True)
    try:
        outcome = commit(changes, roots)
    except RunnerCheckError as exc:
        print(f"error: {exc}", flush=True)
        return
    for refused in outcome.refused:
        print(f"{refused.code} {refused.message}", flush=True)
    print("ok", flush=True)


if __name__ == "__main__":
    _child(sys.argv[1])
