"""``runnercheck check``: the fast syntactic engine (stdlib ``ast``, never imports the code).

* :mod:`runnercheck.check.pipeline`: find the files, read their facts (the analysis
  layer, :mod:`runnercheck.analysis`), run the rules, apply suppressions;
* :mod:`runnercheck.check.rules`: one module per rule, each with its catalog entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runnercheck.check.pipeline import CheckResult as CheckResult
    from runnercheck.check.pipeline import check_paths as check_paths
    from runnercheck.check.pipeline import check_sources as check_sources

__all__ = ["CheckResult", "check_paths", "check_sources"]


def __getattr__(name: str) -> Any:
    """The pipeline is imported on first use: a module of this package that another
    command reads (``partners`` for ``migrate``) does not load the rules."""
    if name in __all__:
        from runnercheck.check import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'runnercheck.check' has no attribute {name!r}")
