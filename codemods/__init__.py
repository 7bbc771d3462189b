"""LibCST codemods behind ``runnercheck migrate``.

One command per module, each also an ordinary LibCST codemod command::

    python -m libcst.tool codemod -x codemods.self_return.SelfReturnCommand path/to/file.py

* :mod:`codemods.merge_broadcasts` -- one broadcast per step (worker + runners, across
  files; the LibCST command handles a file that holds the whole group)
* :mod:`codemods.self_return` -- ``from_broadcasted_tensor_dict`` returns ``Self``
* :mod:`codemods.driver_only` -- declare unbroadcast input fields driver-only
* :mod:`codemods.super_dict` -- a subclass dict that re-lists its parent's keys calls ``super()``

The pipeline is :mod:`codemods.pipeline` (facts -> plan -> rewrite -> verify) and
:mod:`runnercheck.writes.transaction` (each group written as one journaled transaction, in place:
:mod:`runnercheck.writes.write`; recovered after a crash: :mod:`runnercheck.writes.recovery`); refusal
reasons (MIG codes) are in :mod:`runnercheck.catalog`.

"""
