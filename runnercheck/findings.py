"""A finding: one rule violated at one place. Every engine reports these.

A finding is a :class:`~runnercheck.diagnostics.Diagnostic`: an *error* breaks
something at run time, a *note* is true to a rule's letter without a runtime
consequence, or sits in code that cannot run, and says why. Only errors fail a run by
default."""

from __future__ import annotations

from runnercheck.diagnostics import Diagnostic, Severity

Finding = Diagnostic

__all__ = ["Finding", "Severity"]
