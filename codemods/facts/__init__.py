"""Facts only ``migrate`` reads, over the analysis project (:mod:`runnercheck.analysis`):
the worker/runner groups it rewrites together (:mod:`codemods.facts.groups`) and the
types the runners state for the contract's methods (:mod:`codemods.facts.signatures`).
``check`` never imports them."""
