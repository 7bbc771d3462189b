"""``runnercheck check``: the fast syntactic engine (stdlib ``ast``, never imports the code).

* :mod:`runnercheck.check.pipeline`: find the files, read their facts (the analysis
  layer, :mod:`runnercheck.analysis`), run the rules, apply suppressions;
* :mod:`runnercheck.check.rules`: one module per rule, each with its catalog entry.
"""

from runnercheck.check.pipeline import CheckResult, check_paths, check_sources

__all__ = ["CheckResult", "check_paths", "check_sources"]
