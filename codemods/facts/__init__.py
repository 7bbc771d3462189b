"""Facts only ``migrate`` reads, over the analysis project (:mod:`runnercheck.analysis`):
the worker/runner groups it rewrites together (:mod:`codemods.facts.groups`), the
types the runners state for the contract's methods (:mod:`codemods.facts.signatures`),
and, for the verification, the values of the step's methods
(:mod:`codemods.facts.values`) and where each comes from (:mod:`codemods.facts.sources`).
``check`` never imports them (an import-linter contract)."""
