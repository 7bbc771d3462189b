"""What a condition of a step says: which ranks take a branch (:data:`Role`, from the
driver flag) and which names it compares with literals (:class:`Guard`,
:class:`Condition`). A leaf of the analysis layer: the facts model and the recognisers
both use it, so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["driver", "non-driver"]


@dataclass(frozen=True)
class Guard:
    """One condition of an ``if`` that tests a name against a literal: ``name`` is a
    parameter, a local or ``self.X``; ``op`` is ``"truthy"``, ``"falsy"``, ``"is"``,
    ``"is not"``, ``"=="`` or ``"!="``; ``value`` is the literal's ``repr`` ("" for the
    truth tests)."""

    name: str
    op: str
    value: str = ""


@dataclass(frozen=True)
class Condition:
    """An ``if`` around a statement: the conjunction of its guards (``if a and not b``),
    and whether the statement sits in its body (True) or its ``else`` (False)."""

    guards: tuple[Guard, ...]
    then: bool
    #: The guards are the whole test (else the ``else`` may run while they all hold).
    complete: bool = True


# ------------------------------------------------------- what decides a test
@dataclass(frozen=True)
class Atom:
    """One comparison of a test, as the collective schedule reads it
    (:mod:`runnercheck.analysis.schedule`): ``subject`` is the tested value as written
    (``"no_spec"``, ``"data['no_spec']"``, ``"self.do_metadata_broadcast"``,
    ``"len(seqs)"``), ``op`` is ``"truthy"``, ``"=="``, ``"!="``, ``"is"``, ``"is not"``,
    ``"<"``, ``"<="``, ``">"`` or ``">="``, ``value`` the literal's ``repr`` ("" for a
    truth test). A test the reader cannot name is an atom of its own: ``subject`` is
    ``"?LINE:COL"`` (nothing else decides it). ``role`` is set for a test of the rank:
    the atom holds exactly on that role's ranks (``self.is_driver_worker``,
    ``self.rank == self._driver_rank``)."""

    subject: str
    op: str = "truthy"
    value: str = ""
    role: Role | None = None


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Test, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Test, ...]


@dataclass(frozen=True)
class Not:
    part: Test


#: A branch's test as a formula over :class:`Atom`.
Test = Atom | AllOf | AnyOf | Not
