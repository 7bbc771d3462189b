"""``runnercheck check``: the fast syntactic engine (stdlib ``ast``, never imports the code).

* :mod:`runnercheck.check.pipeline`: read the facts of the given paths (the workspace,
  :mod:`runnercheck.workspace`), run the rules (:mod:`runnercheck.rules`, one module per
  rule, each with its catalog entry), apply suppressions;
* :mod:`runnercheck.check.discovery`: what the walk and ``migrate``'s journal add;
* :mod:`runnercheck.check.report`: the formats of the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runnercheck.check.pipeline import CheckResult as CheckResult
    from runnercheck.check.pipeline import check_paths as check_paths
    from runnercheck.check.pipeline import check_sources as check_sources

__all__ = ["CheckResult", "check_paths", "check_sources"]


def __getattr__(name: str) -> Any:
    """The pipeline is imported on first use: importing a module of this package does
    not load the rules."""
    if name in __all__:
        from runnercheck.check import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'runnercheck.check' has no attribute {name!r}")
