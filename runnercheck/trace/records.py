"""What a traced process writes: one line per collective, read back by the monitor.

A trace file (``<pid>.trace``) holds tab-separated lines, appended with one ``write``
each, so a line is complete before the collective it describes starts (a rank that then
hangs has already told where):

* ``w KEY RANK WORLD_SIZE`` -- a process group was joined; the records that follow
  belong to that world (``KEY`` is its rendezvous address, equal on every rank);
* ``c INDEX OP GROUP PEER SHAPE BYTES STEP LOGICAL LOGICAL_NAME KIND METHOD STEP_METHOD
  SITE SITE_FUNCTION START_NS`` -- a collective (see :class:`CollectiveRecord`);
* ``b INDEX BYTES`` -- the size of what a receiving rank got, known only afterwards
  (object collectives);
* ``e INDEX END_NS`` -- the collective returned (written as soon as it did, so a rank
  killed afterwards does not look stuck in it);
* ``t SECONDS CALLS`` -- at the process's exit: the time its recorder spent on CALLS
  collectives (outside the collectives themselves).

Times are ``time.monotonic_ns()``: one clock for every process of the machine, so the
ranks' times line up. A reader takes what it knows of a line and ignores fields appended
after them: a ``c`` line of an earlier version (without ``START_NS``) reads with no time,
and an ``e`` line is skipped by a version that does not know it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Point-to-point operations: recorded, but not part of a group's common sequence.
POINT_TO_POINT = frozenset({"send", "recv", "isend", "irecv"})
#: Operations that count as broadcasts when they are not part of a logical broadcast.
BROADCAST_OPS = frozenset({"broadcast", "broadcast_object_list"})

#: The contract method kinds a collective can run under, innermost first.
KINDS = ("prepare", "convert", "execute", "worker")


@dataclass(frozen=True)
class CollectiveRecord:
    """One ``torch.distributed`` call on one rank."""

    #: Position in this rank's sequence of collectives in this world (from 0).
    index: int
    #: The ``torch.distributed`` function, e.g. ``broadcast_object_list``.
    op: str
    #: ``""`` for the default (world) group, else the group's global ranks, ``"0,1"``.
    group: str
    #: ``src`` or ``dst`` where the function has one, else -1.
    peer: int
    #: ``dtype:numel`` of the tensor a tensor collective moves; ``""`` otherwise.
    shape: str
    #: Bytes this rank sends or receives (tensors' sizes; pickled size of objects).
    nbytes: int
    #: Engine step (from 0) on this rank; -1 outside any step.
    step: int
    #: Position of the logical broadcast this call is a part of; -1 when it stands alone.
    logical: int
    #: The logical broadcast's function (``broadcast_tensor_dict``), or ``""``.
    logical_name: str
    #: Innermost contract method on the stack: prepare, convert, execute, worker or ``""``.
    kind: str
    #: That method as ``Class.method`` (the class of ``self``).
    method: str
    #: The outermost step method on the stack as ``Class.method``, or ``""``.
    step_method: str
    #: ``path:line`` that called the collective (or the logical broadcast it is part of).
    site: str
    #: The function holding :attr:`site`.
    site_function: str
    #: ``time.monotonic_ns()`` when the call started, and when it returned (-1: unknown,
    #: or it never returned).
    start_ns: int = -1
    end_ns: int = -1

    @property
    def point_to_point(self) -> bool:
        return self.op in POINT_TO_POINT

    @property
    def signature(self) -> tuple[str, str, str, int, str, str]:
        """What every rank of the group must agree on at this position."""
        return (self.op, self.logical_name, self.group, self.peer, self.shape, self.kind)

    def describe(self) -> str:
        """``op`` (with its logical broadcast) at its site, in its method."""
        what = self.op if not self.logical_name else f"{self.op} (part of {self.logical_name})"
        where = f"{self.site} in {self.site_function}"
        method = f" [{self.kind}: {self.method}]" if self.kind else ""
        return f"{what} at {where}{method}"


def _clean(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ")


def encode_world(key: str, rank: int, world_size: int) -> str:
    return f"w\t{_clean(key)}\t{rank}\t{world_size}\n"


def encode_collective(record: CollectiveRecord) -> str:
    r = record
    fields = (
        "c",
        str(r.index),
        r.op,
        r.group,
        str(r.peer),
        r.shape,
        str(r.nbytes),
        str(r.step),
        str(r.logical),
        r.logical_name,
        r.kind,
        _clean(r.method),
        _clean(r.step_method),
        _clean(r.site),
        _clean(r.site_function),
        str(r.start_ns),
    )
    return "\t".join(fields) + "\n"


def encode_bytes(index: int, nbytes: int) -> str:
    return f"b\t{index}\t{nbytes}\n"


def encode_cost(seconds: float, calls: int) -> str:
    return f"t\t{seconds:.6f}\t{calls}\n"


@dataclass(frozen=True)
class WorldLine:
    key: str
    rank: int
    world_size: int


@dataclass(frozen=True)
class BytesLine:
    index: int
    nbytes: int


@dataclass(frozen=True)
class EndLine:
    index: int
    end_ns: int


@dataclass(frozen=True)
class CostLine:
    seconds: float
    calls: int


Line = WorldLine | CollectiveRecord | BytesLine | EndLine | CostLine


def decode(line: str) -> Line | None:
    """One line back into its record; None for a line this version does not know."""
    parts = line.rstrip("\n").split("\t")
    try:
        if parts[0] == "w" and len(parts) == 4:
            return WorldLine(parts[1], int(parts[2]), int(parts[3]))
        if parts[0] == "b" and len(parts) == 3:
            return BytesLine(int(parts[1]), int(parts[2]))
        if parts[0] == "e" and len(parts) >= 3:
            return EndLine(int(parts[1]), int(parts[2]))
        if parts[0] == "t" and len(parts) == 3:
            return CostLine(float(parts[1]), int(parts[2]))
        if parts[0] == "c" and len(parts) >= 15:
            return CollectiveRecord(
                index=int(parts[1]),
                op=parts[2],
                group=parts[3],
                peer=int(parts[4]),
                shape=parts[5],
                nbytes=int(parts[6]),
                step=int(parts[7]),
                logical=int(parts[8]),
                logical_name=parts[9],
                kind=parts[10],
                method=parts[11],
                step_method=parts[12],
                site=parts[13],
                site_function=parts[14],
                start_ns=int(parts[15]) if len(parts) > 15 else -1,
            )
    except ValueError:
        return None
    return None
