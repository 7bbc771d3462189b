"""The reasons ``migrate`` skips a file or gives a write back (MIG0xx): raised by the
run (:mod:`codemods.framework.run`, :mod:`codemods.framework.pipeline`) and the writes
(:mod:`runnercheck.writes.transaction`), on input no example can hold."""

from __future__ import annotations

from runnercheck.catalog import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        code="MIG003",
        name="symlink-outside",
        tool="migrate",
        summary="A path leads outside the given paths (a symbolic link, a directory swapped during the run, a file with other hard links); skipped.",
        why="migrate writes only inside the paths it was given: it never follows a link out of them, never writes through a directory replaced while it runs, and never writes a file in place whose other hard links may lie outside (`--replace-hard-links` writes a new file instead).",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG004",
        name="read-only",
        tool="migrate",
        summary="A file of the group is read-only (`--force` rewrites it).",
        why="A read-only file is usually read-only on purpose; migrate does not rewrite it without being told to.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG005",
        name="changed-on-disk",
        tool="migrate",
        summary="A file of the group changed while the run planned or wrote it; the group is as it was.",
        why="An edit made during the run must never be lost: every file is compared with what was planned, under the tree lock, right before it is replaced.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG006",
        name="write-failed",
        tool="migrate",
        summary="A file of the group could not be written; the group was put back as it was.",
        why="A group is one transaction: a failed write rolls back the files already written, so the tree is never half old and half new.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG007",
        name="half-applied",
        tool="migrate",
        summary="An interrupted run left the group half-applied (`migrate` rolls it back).",
        why="A kill in the middle of a group's writes leaves its journal; the next run (or `--recover`) rolls the group back, or forward when that is what keeps the user's edits. Without a journal (an editor saved a buffer read before the run), a legacy worker driving a migrated runner, or the reverse, is reported as well: it fails at its first step, and only a person knows which version of each file to keep. A journal that is not as `migrate` writes it is reported and left alone.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
)
