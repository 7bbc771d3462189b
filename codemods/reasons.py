"""Why ``runnercheck migrate`` refused or skipped something: one code per reason.

A refusal leaves every file of the worker/runner group byte-identical; the
report names the code, the file and the line. Codes are stable (scripts may
match on them); the text explains what the planner could not prove.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    code: str
    name: str
    summary: str


REASONS: tuple[Reason, ...] = (
    Reason("MIG001", "syntax-error", "the file does not parse; it was skipped"),
    Reason("MIG002", "unreadable", "the file cannot be read or decoded; it was skipped"),
    Reason("MIG003", "symlink-outside", "a symbolic link points outside the given paths; skipped"),
    Reason("MIG004", "read-only", "a file of the group is read-only (--force rewrites it)"),
    Reason(
        "MIG005",
        "changed-on-disk",
        "a file of the group changed while the run planned or wrote it; the group is as it was",
    ),
    Reason(
        "MIG006",
        "write-failed",
        "a file of the group could not be written; the group was put back as it was",
    ),
    Reason(
        "MIG007",
        "half-applied",
        "an interrupted run left the group half-applied (`migrate` rolls it back)",
    ),
    Reason("MIG101", "extra-broadcast", "a broadcast the planner does not recognise"),
    Reason("MIG102", "untraceable-key", "a broadcast key whose value or use cannot be traced"),
    Reason("MIG103", "missing-runner", "a runner the worker drives cannot be found"),
    Reason(
        "MIG104", "missing-worker", "a runner broadcasts but no worker that drives it was found"
    ),
    Reason("MIG105", "unrecognised-shape", "a method does not have the driver/non-driver shape"),
    Reason(
        "MIG106",
        "non-driver-state",
        "the non-driver path reads runner state other than the attention backend",
    ),
    Reason("MIG107", "key-collision", "the worker and a runner broadcast the same key"),
    Reason("MIG108", "name-taken", "a name the merged shape needs is already used"),
    Reason(
        "MIG109",
        "unmigrated-caller",
        "code outside the group calls a method whose signature changes",
    ),
    Reason(
        "MIG110",
        "verify-failed",
        "the rewritten sources did not re-parse, compile or re-analyse as migrated",
    ),
    Reason(
        "MIG199",
        "internal-error",
        "the planner failed on this group (a bug; please report it); the group was left alone",
    ),
    Reason(
        "MIG201",
        "parent-not-found",
        "the parent class needed by a single-class codemod is not in the given paths",
    ),
    Reason("MIG202", "order-dependent", "the rewrite would change which value wins for a key"),
    Reason(
        "MIG203",
        "drifted-copy",
        "a subclass dict re-lists only part of its parent's keys; "
        "calling super() would change what it broadcasts",
    ),
)

_BY_CODE = {reason.code: reason for reason in REASONS}


def get(code: str) -> Reason:
    return _BY_CODE[code]
