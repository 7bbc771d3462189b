"""RC110 wrapper-control-broadcast: A wrapper worker broadcasts its own control dict, then runs inner workers' steps that broadcast too; the control keys could travel in the inner worker's dict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath

from runnercheck.analysis.fold import FoldPlan, FoldRefusal, fold_plan
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project, StepPath, Term
from runnercheck.analysis.wrappers import representative
from runnercheck.catalog import Rule
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

#: RC110's and MIG204's examples up to the wrapper's control values: an inner worker whose step
#: carries the request's extras, and a wrapper that steps it (the tests build on it).
MIG204_WORKERS = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    received_extras: dict

    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, execute_model_req=None):
        if self.is_driver_worker:
            if execute_model_req is None:
                broadcast_tensor_dict({}, src=0)
                return None
            data = {
                "tokens": execute_model_req.tokens,
                "broadcast_extras": execute_model_req.broadcast_extras,
            }
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            if not data:
                return None
            self.received_extras = data.pop("broadcast_extras")
        return [data["tokens"]]


class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer = proposer
        self.scorer = scorer
        self.rank = rank

    def execute_model(self, execute_model_req=None):
        if self.rank != 0:
            self._run_non_driver()
            return []
        if execute_model_req is None:
            broadcast_tensor_dict({}, src=0)
            return []
"""

RULE = Rule(
    code="RC110",
    name="wrapper-control-broadcast",
    tool="check",
    summary="A wrapper worker broadcasts its own control dict, then runs inner workers' steps that broadcast too; the control keys could travel in the inner worker's dict.",
    why="vLLM's speculative-decoding worker (0.5.1 to the last V0 release, 0.8.x) broadcasts `num_lookahead_slots` on its own before its proposer (once per lookahead slot) and its scorer broadcast their inputs: 1 + k + 1 broadcasts per step, each a pickled metadata round; the control keys fit in the first inner broadcast. It is an error only where `runnercheck migrate --select fold-control-broadcast` folds that broadcast on that code (the rule asks the codemod's own plan); elsewhere (the first inner step depends on the control values, as in vLLM's wrapper, whose scorer runs first on a prefill; an inner worker with no extras channel; ...) it is a note naming the MIG204 shape that refuses it.",
    bad=MIG204_WORKERS
    + """\
        k = execute_model_req.lookahead
        broadcast_tensor_dict({"k": k}, src=0)
        for _ in range(max(k, 1)):
            self.proposer.execute_model(execute_model_req)
        return self.scorer.execute_model(execute_model_req)

    def _run_non_driver(self):
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False
        k = data["k"]
        for _ in range(max(k, 1)):
            self.proposer.execute_model()
        self.scorer.execute_model()
        return True
""",
    good=MIG204_WORKERS
    + """\
        k = execute_model_req.lookahead
        # the first proposer step carries the lookahead count in its own dict
        execute_model_req.broadcast_extras = {"k": k}
        for _ in range(max(k, 1)):
            self.proposer.execute_model(execute_model_req)
        return self.scorer.execute_model(execute_model_req)

    def _run_non_driver(self):
        if self.proposer.execute_model() is None:
            return False
        k = self.proposer.received_extras["k"]
        for _ in range(max(k, 1) - 1):
            self.proposer.execute_model()
        self.scorer.execute_model()
        return True
""",
)

#: The codemod that folds the control dict into the first inner step's broadcast (the
#: name ``runnercheck migrate --select`` takes; codemods sit above check's layer).
CODEMOD = "fold-control-broadcast"


def _where(term: Term) -> str:
    return f"{PurePath(term.site.path).name}:{term.site.line}"


def _control(project: Project, path: StepPath) -> Term:
    """The own broadcast to report: one that sends, in a reported file if possible."""
    own = list(path.own)
    if project.reportable is not None:
        own = [t for t in own if t.site.path in project.reportable] or own
    return next((t for t in own if t.sends), own[0])


def _count(path: StepPath) -> str:
    if path.symbolic:
        return f"{path.describe()} broadcasts per step"
    return f"{path.count()} broadcasts per step ({path.describe()})"


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A worker whose ``execute_model`` broadcasts its own dict, then runs an inner
    worker's ``execute_model`` that broadcasts: reported at the wrapper's (sending)
    broadcast, with the broadcasts of the step."""
    ref = project.resolve_method(cls, project.contract.execute_method)
    if ref is None or ref.owner is not cls or project.is_abstract(cls):
        return
    step = project.wrapper_step(cls)
    if step is None:
        return
    paths = step.control_paths()
    chosen = representative(paths)
    if chosen is None:
        return
    senders = [p for p in paths if any(t.sends for t in p.own)]
    control = _control(project, representative(senders) or chosen)
    found = (
        f"{cls.name} broadcasts its own control dict ({_where(control)}), then runs inner "
        f"workers' steps that broadcast too: up to {_count(chosen)}; "
    )
    plan = fold_plan(project, cls)
    fix = "send the control keys in the first inner worker's dict"
    if isinstance(plan, FoldPlan) and plan.handed:
        fix = (
            "send the control keys in the dict of the first inner step, whichever they "
            "select (the other ranks receive it and hand it to that step),"
        )
    finding = Finding(
        control.site.path,
        control.site.line,
        control.site.col,
        RULE.code,
        found + f"{fix} to save a broadcast per step (`runnercheck migrate --select {CODEMOD}`)",
    )
    if isinstance(plan, FoldRefusal):
        # the codemod refuses this code: an inefficiency with no fix that works here
        finding = Finding(
            control.site.path,
            control.site.line,
            control.site.col,
            RULE.code,
            found + "the control keys could travel in the first inner step's broadcast, but "
            "no automatic fix applies",
        ).as_note(f"`runnercheck migrate --select {CODEMOD}` refuses it, MIG204: {plan.message}")
    yield finding


CHECK = CheckRule(RULE, check_class=check_class)
