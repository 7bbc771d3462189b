"""Read a traced run's files while it runs; find the first divergence or a hang.

The monitor reads every ``<pid>.trace`` file of the run directory from where it left off,
sorts the records into worlds (one per rendezvous address) and ranks, and compares the
ranks of each group position by position: at every position the ranks must run the same
operation (same logical broadcast, peer, group, tensor shape and contract method kind).
Point-to-point calls are recorded but not compared.

* The first position where two ranks differ is a :class:`Divergence`: it is known as soon
  as both lines exist, which is before the mismatched calls can hang.
* A rank that waits at a position some other rank of its world has not reached, with no
  new collective in that world for ``deadline`` seconds, is a :class:`Hang`; the stacks of
  the world's processes say where the others are.
* At the end, ranks of one world that ran different numbers of collectives are a
  divergence too (the first collective one rank never ran).
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from runnercheck.trace.bootstrap import STACK_SIGNAL
from runnercheck.trace.recorder import readable_part
from runnercheck.trace.records import (
    BytesLine,
    CollectiveRecord,
    CostLine,
    EndLine,
    WorldLine,
    decode,
)


@dataclass
class RankTrace:
    rank: int
    pid: int
    records: list[CollectiveRecord] = field(default_factory=list)
    #: Compared sequences: records of each group (point-to-point left out).
    by_group: dict[str, list[CollectiveRecord]] = field(default_factory=dict)
    #: What recording cost this process (seconds, calls), told at its exit.
    cost: tuple[float, int] | None = None


@dataclass
class WorldTrace:
    key: str
    size: int
    ranks: dict[int, RankTrace] = field(default_factory=dict)
    last_change: float = 0.0
    checked: dict[str, int] = field(default_factory=dict)

    def members(self, group: str) -> list[int]:
        if not group:
            return list(range(self.size))
        try:
            return [int(rank) for rank in group.split(",")]
        except ValueError:
            return []


@dataclass(frozen=True)
class Divergence:
    """Ranks of one world disagree at ``position`` of their sequence in ``group``."""

    world: str
    group: str
    position: int
    #: Each member rank's collective at that position (None: it never ran one).
    calls: dict[int, CollectiveRecord | None]

    def lines(self) -> list[str]:
        group = f" in group [{self.group}]" if self.group else ""
        steps = sorted({call.step for call in self.calls.values() if call is not None})
        step = f" (step {', '.join(str(s) for s in steps)})" if steps else ""
        head = f"ranks diverge at collective #{self.position}{group}{step} of world {self.world}"
        out = [head]
        for rank, call in sorted(self.calls.items()):
            what = call.describe() if call is not None else "no collective: it never ran one"
            out.append(f"  rank {rank}: {what}")
        return out


@dataclass(frozen=True)
class Hang:
    """Some ranks wait at ``position`` that others have not reached, past the deadline."""

    world: str
    position: int
    deadline: float
    #: Per rank: what it waits in, or where its last collective was.
    ranks: dict[int, str]
    #: Per rank: where its main thread is, from its stack dump (when it answered).
    stacks: dict[int, str]

    def lines(self) -> list[str]:
        out = [
            f"no progress for {self.deadline:g} s at collective #{self.position} "
            f"of world {self.world}: the ranks are stuck"
        ]
        for rank, text in sorted(self.ranks.items()):
            where = self.stacks.get(rank)
            out.append(f"  rank {rank}: {text}" + (f"; now at {where}" if where else ""))
        return out


class _File:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = int(path.stem)
        self.offset = 0
        self.pending = b""
        self.world: tuple[WorldTrace, RankTrace] | None = None


class Monitor:
    """Incremental reader and comparer of one run directory."""

    def __init__(self, directory: Path, deadline: float) -> None:
        self.directory = directory
        self.deadline = deadline
        self.worlds: list[WorldTrace] = []
        self.divergence: Divergence | None = None
        self._files: dict[str, _File] = {}

    # ------------------------------------------------------------------ reading

    def poll(self, now: float | None = None) -> bool:
        """Read what is new; returns True if anything was."""
        now = time.monotonic() if now is None else now
        changed = False
        try:
            names = [entry.name for entry in os.scandir(self.directory)]
        except OSError:
            return False
        for name in names:
            if not name.endswith(".trace") or not name[:-6].isdigit():
                continue
            state = self._files.get(name)
            if state is None:
                state = self._files[name] = _File(self.directory / name)
            changed |= self._read(state, now)
        return changed

    def _read(self, state: _File, now: float) -> bool:
        try:
            with open(state.path, "rb") as handle:
                handle.seek(state.offset)
                data = handle.read()
        except OSError:
            return False
        data = readable_part(data)
        if not data:
            return False
        state.offset += len(data)
        data = state.pending + data
        lines = data.split(b"\n")
        state.pending = lines.pop()
        for raw in lines:
            self._feed(state, raw.decode(errors="replace"), now)
        return bool(lines)

    def _feed(self, state: _File, line: str, now: float) -> None:
        item = decode(line)
        if isinstance(item, WorldLine):
            world = self._world_for(item, state.pid)
            rank = world.ranks.setdefault(item.rank, RankTrace(item.rank, state.pid))
            state.world = (world, rank)
            world.last_change = now
        elif isinstance(item, CollectiveRecord) and state.world is not None:
            world, rank = state.world
            rank.records.append(item)
            if not item.point_to_point:
                rank.by_group.setdefault(item.group, []).append(item)
            world.last_change = now
        elif isinstance(item, CostLine) and state.world is not None:
            state.world[1].cost = (item.seconds, item.calls)
        elif isinstance(item, (BytesLine, EndLine)) and state.world is not None:
            self._amend(state.world[1], item)

    @staticmethod
    def _amend(rank: RankTrace, item: BytesLine | EndLine) -> None:
        """Bytes or the end of a record this rank wrote before."""
        records = rank.records
        if 0 <= item.index < len(records) and records[item.index].index == item.index:
            old = records[item.index]
            if isinstance(item, BytesLine):
                records[item.index] = replace(old, nbytes=item.nbytes)
            else:
                records[item.index] = replace(old, end_ns=item.end_ns)

    def _world_for(self, line: WorldLine, pid: int) -> WorldTrace:
        for world in reversed(self.worlds):
            if world.key == line.key and world.size == line.world_size:
                if line.rank not in world.ranks:
                    return world
                break
        world = WorldTrace(line.key, line.world_size)
        if any(w.key == line.key for w in self.worlds):
            world.key = f"{line.key} (#{sum(w.key.startswith(line.key) for w in self.worlds) + 1})"
        self.worlds.append(world)
        return world

    # ------------------------------------------------------------------ checking

    def check(self) -> Divergence | None:
        """The first divergence among the positions every member has reached."""
        if self.divergence is not None:
            return self.divergence
        for world in self.worlds:
            groups = {group for rank in world.ranks.values() for group in rank.by_group}
            for group in sorted(groups):
                found = self._check_group(world, group)
                if found is not None:
                    self.divergence = found
                    return found
        return None

    def _check_group(self, world: WorldTrace, group: str) -> Divergence | None:
        members = world.members(group)
        if not members or any(rank not in world.ranks for rank in members):
            return None
        sequences = [world.ranks[rank].by_group.get(group, []) for rank in members]
        reached = min(len(seq) for seq in sequences)
        start = world.checked.get(group, 0)
        for position in range(start, reached):
            first = sequences[0][position].signature
            if any(seq[position].signature != first for seq in sequences[1:]):
                calls: dict[int, CollectiveRecord | None] = {
                    rank: seq[position] for rank, seq in zip(members, sequences, strict=True)
                }
                return Divergence(world.key, group, position, calls)
        world.checked[group] = reached
        return None

    def check_hang(self, now: float | None = None) -> Hang | None:
        """A world whose ranks stand at different positions, unchanged for the deadline."""
        now = time.monotonic() if now is None else now
        for world in self.worlds:
            if now - world.last_change < self.deadline:
                continue
            sequences = {rank: trace.by_group.get("", []) for rank, trace in world.ranks.items()}
            lengths = {len(seq) for seq in sequences.values()}
            if len(world.ranks) == world.size and len(lengths) <= 1:
                continue
            if not any(_alive(trace.pid) for trace in world.ranks.values()):
                continue
            position = min(lengths) if len(world.ranks) == world.size else 0
            return Hang(world.key, position, self.deadline, self._positions(world, position), {})
        return None

    def _positions(self, world: WorldTrace, position: int) -> dict[int, str]:
        out: dict[int, str] = {}
        for rank in range(world.size):
            trace = world.ranks.get(rank)
            seq = trace.by_group.get("", []) if trace else []
            if len(seq) > position:
                out[rank] = f"waits in {seq[position].describe()}"
            elif seq:
                out[rank] = f"has not reached it; its last collective: {seq[-1].describe()}"
            elif trace is not None:
                out[rank] = "has not reached it; it ran no collective yet"
            else:
                out[rank] = "never joined the world"
        return out

    def finish(self) -> Divergence | None:
        """After the run: a world whose ranks ran different numbers of collectives."""
        found = self.check()
        if found is not None:
            return found
        for world in self.worlds:
            if len(world.ranks) != world.size:
                continue
            groups = sorted({group for rank in world.ranks.values() for group in rank.by_group})
            for group in groups:
                members = world.members(group)
                sequences = {
                    rank: world.ranks[rank].by_group.get(group, [])
                    for rank in members
                    if rank in world.ranks
                }
                lengths = {len(seq) for seq in sequences.values()}
                if len(lengths) > 1:
                    position = min(lengths)
                    calls = {
                        rank: seq[position] if len(seq) > position else None
                        for rank, seq in sequences.items()
                    }
                    self.divergence = Divergence(world.key, group, position, calls)
                    return self.divergence
        return None

    # ------------------------------------------------------------------ processes

    def pids(self) -> list[int]:
        """Every process that wrote a trace file in this run."""
        return sorted(state.pid for state in self._files.values())

    def stacks(self, world: WorldTrace | None = None, wait: float = 0.5) -> dict[int, str]:
        """Ask the (world's) live processes for their stacks; per rank, where the main
        thread is, outside torch."""
        ranks = (
            {trace.pid: rank for rank, trace in world.ranks.items()}
            if world is not None
            else {pid: -1 for pid in self.pids()}
        )
        asked = [pid for pid in ranks if _alive(pid) and _signal(pid, STACK_SIGNAL)]
        if not asked:
            return {}
        time.sleep(wait)
        out: dict[int, str] = {}
        for pid in asked:
            where = _innermost_user_frame(self.directory / f"{pid}.stack")
            if where:
                out[ranks[pid]] = where
        return out

    def world_named(self, key: str) -> WorldTrace | None:
        return next((world for world in self.worlds if world.key == key), None)


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _innermost_user_frame(path: Path) -> str:
    """The first frame of the dump's current thread that is not torch's or ours."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    blocks = text.split("\n\n")
    block = next((b for b in blocks if b.startswith("Current thread")), blocks[0] if blocks else "")
    for line in block.splitlines():
        match = _FRAME.match(line)
        if not match:
            continue
        file = match.group("file")
        if f"{os.sep}torch{os.sep}" in file or f"runnercheck{os.sep}trace{os.sep}" in file:
            continue
        cwd = os.getcwd() + os.sep
        file = file[len(cwd) :] if file.startswith(cwd) else file
        return f"{file}:{match.group('line')} in {match.group('func')}"
    return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pid: int, signum: signal.Signals) -> bool:
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def belongs_to_run(pid: int, directory: Path) -> bool:
    """Whether process ``pid`` is a process of the run writing to ``directory`` (its
    environment names the directory), so a reused pid is never killed."""
    from runnercheck.trace.bootstrap import ENV_DIR

    marker = f"{ENV_DIR}={directory}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except FileNotFoundError:
        return False
    except OSError:
        return _alive(pid)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    return _alive(pid)
