"""Facts and a project of small inline sources: each file's text read with the real
:func:`~runnercheck.analysis.extract.extract_source`, joined by the real
:class:`~runnercheck.analysis.project.Project` (nothing is written to disk).

Paths name a package that exists nowhere on disk (``acme/``): the hierarchy asks the
file system whether a directory is a package only when no ``__init__.py`` of the run
says so.
"""

from __future__ import annotations

from textwrap import dedent

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project


def facts_of(source: str, path: str = "acme/example.py") -> ModuleFacts:
    """One file's facts (its text dedented)."""
    return extract_source(dedent(source), path)


def project_of(sources: dict[str, str]) -> Project:
    """The project of ``{path: source}`` (each text dedented)."""
    return Project(facts_of(source, path) for path, source in sources.items())


def class_named(project: Project, name: str, path: str | None = None) -> ClassFacts:
    """The one class of that name (in ``path`` when given)."""
    found = [
        c
        for c in project.hierarchy.all_classes()
        if c.name == name and (path is None or c.path == path)
    ]
    assert len(found) == 1, f"{len(found)} classes named {name}"
    return found[0]
