"""What ``migrate`` reports, in one vocabulary shared by every stage that reports it.

* :class:`Refused`: something left alone, and why: a file that does not parse, a
  group the planner cannot prove safe, a class a single-class codemod leaves, a unit
  the transaction does not write. Its ``kind`` names the stage that refused
  (a codemod's name, ``parse`` or ``write``).
* :class:`Note`: something said that changes nothing (a pair left alone, a journal
  met, the layout kept, a caller named, a new mypy error).
* :class:`Change`: one file's contents as read and as planned (``old`` is None for a
  new file), with the group it is written with and the codemods that made it.

Plain, frozen data: the records cross process boundaries and are shown by the CLI,
the demo and the benchmarks alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Refused:
    """Left alone: the files it names stay byte-identical."""

    #: the stage that refused: a codemod's name, ``parse`` or ``write``
    kind: str
    #: the catalog's MIG code
    code: str
    path: Path
    line: int
    message: str
    #: the group (label) left alone with it, "" for a file alone
    group: str = ""
    #: the shape left alone, and what to change by hand (the catalog's when not given)
    shape: str = ""
    advice: str = ""
    #: every class of the group left alone with it (``Worker (worker.py)``)
    held_back: tuple[str, ...] = ()
    #: every file left alone with it (a transaction's unit)
    paths: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Note:
    """Said, and nothing changed by it."""

    #: what the note is about: ``pair``, ``journal``, ``path``, ``format``, ``callers``, ``mypy``
    kind: str
    path: Path
    line: int
    message: str
    #: the subject the line names (a pair's group label); the kind when not given
    label: str = ""
    #: the catalog's MIG code of a shape left alone that no codemod can fix (the
    #: fold's MIG204 where it does not apply), "" for any other note
    code: str = ""

    @property
    def subject(self) -> str:
        return self.label or self.kind


@dataclass(frozen=True)
class Change:
    """One file: its contents as read (None: a new file) and as planned."""

    path: Path
    old: bytes | None
    new: bytes
    #: the worker/runner group(s) the change belongs to (``A + B``), one transaction
    #: each; "" for a file changed alone
    group: str = ""
    #: the codemods that made it
    codemods: tuple[str, ...] = ()
    #: ``migrate --check`` only: the analysis knows the file changes and how it verifies
    #: (:mod:`codemods.framework.replay`); its new bytes were not made (``new`` is empty)
    exact: bool = False
