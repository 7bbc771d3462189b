"""``runnercheck check``: the fast syntactic engine (stdlib ``ast``, never imports the code).

* :mod:`runnercheck.check.facts`: per-file source facts (shared with the codemods).
* :mod:`runnercheck.check.project`: facts joined across files (MRO, worker/runner pairs,
  keys produced and accepted, broadcasts per step).
"""

from runnercheck.check.runner import CheckResult, check_paths, check_sources

__all__ = ["CheckResult", "check_paths", "check_sources"]
