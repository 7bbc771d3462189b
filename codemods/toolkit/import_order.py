"""The order of the names inside one ``from`` import, as isort sorts them (read by
the LibCST rewrite and by its replay on the ``ast``, which imports no LibCST)."""

from __future__ import annotations


def isort_key(name: str) -> tuple[int, str]:
    """isort's default order inside one import: CONSTANTS, Classes, functions."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1 if name[:1].isupper() else 2, name.lower())
