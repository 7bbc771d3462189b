"""LibCST codemods behind ``runnercheck migrate``; :func:`apply` runs them.

One command per module, each also an ordinary LibCST codemod command::

    python -m libcst.tool codemod -x codemods.self_return.SelfReturnCommand path/to/file.py

* :mod:`codemods.merge_broadcasts` -- one broadcast per step (worker + runners, across
  files; the LibCST command handles a file that holds the whole group)
* :mod:`codemods.self_return` -- ``from_broadcasted_tensor_dict`` returns ``Self``
* :mod:`codemods.driver_only` -- declare unbroadcast input fields driver-only
* :mod:`codemods.super_dict` -- a subclass dict that re-lists its parent's keys calls ``super()``

``codemods.apply(paths, ...)`` (:mod:`codemods.framework.run`) plans, verifies and writes in one
walk of the paths: the CLI, the demo and the benchmarks all go through it. The pipeline
is :mod:`codemods.framework.pipeline` (facts -> plan -> rewrite -> verify) and
:mod:`runnercheck.writes.transaction` (each group written as one journaled transaction, in place:
:mod:`runnercheck.writes.write`; recovered after a crash: :mod:`runnercheck.writes.recovery`); refusal
reasons (MIG codes) are in :mod:`codemods.reasons`.

"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemods.framework.run import apply as apply

__all__ = ["apply"]


def __getattr__(name: str) -> Any:
    """``apply`` is imported on first use: importing one codemod stays light."""
    if name == "apply":
        from codemods.framework.run import apply

        return apply
    raise AttributeError(f"module 'codemods' has no attribute {name!r}")
