"""``merge-broadcasts``: one broadcast per step instead of the worker's plus the runner's.

Cross-file: a worker and the runners it drives are planned together, and the whole
group is rewritten or, on any shape the planner does not recognise, refused with a
reason and left byte-identical. The analysis layer (:mod:`runnercheck.analysis`)
answers every question about meaning (which classes form a group, their MRO, which
methods broadcast); LibCST is used to rewrite.

* :mod:`.groups` -- plan a whole group (runners, then workers), or refuse it;
* :mod:`.runner_model`, :mod:`.runner_plan`, :mod:`.runner_statements`,
  :mod:`.runner_receive`, :mod:`.runner_execute` -- plan one runner;
* :mod:`.worker_model`, :mod:`.worker_plan`, :mod:`.worker_condition`,
  :mod:`.worker_receive` -- plan one worker's step;
* :mod:`.runner_rewrite`, :mod:`.worker_rewrite`, :mod:`.rewrite` -- write the plan;
* :mod:`.command` -- the LibCST command for a file that holds a whole group.
"""

from codemods.merge_broadcasts.command import NAME, MergeBroadcastsCommand
from codemods.merge_broadcasts.rewrite import finish, merge

__all__ = ["NAME", "MergeBroadcastsCommand", "finish", "merge"]
