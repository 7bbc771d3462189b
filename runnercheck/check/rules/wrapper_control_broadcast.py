"""RC110 wrapper-control-broadcast: A wrapper worker broadcasts its own control dict, then runs inner workers' steps that broadcast too; the control keys could travel in the inner worker's dict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project, StepPath, Term
from runnercheck.analysis.wrappers import representative
from runnercheck.catalog import Rule
from runnercheck.check.rules.base import CheckRule
from runnercheck.findings import Finding

RULE = Rule(
    code="RC110",
    name="wrapper-control-broadcast",
    tool="check",
    summary="A wrapper worker broadcasts its own control dict, then runs inner workers' steps that broadcast too; the control keys could travel in the inner worker's dict.",
    why="vLLM's speculative-decoding worker (0.5.1 to the last V0 release, 0.8.x) broadcasts `num_lookahead_slots` on its own before its proposer (once per lookahead slot) and its scorer broadcast their inputs: 1 + k + 1 broadcasts per step, each a pickled metadata round; the control keys fit in the first inner broadcast.",
    bad="""\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": request["tokens"]}, src=0)
            return self.run(request["tokens"])
        data = broadcast_tensor_dict(src=0)
        return self.run(data["tokens"])


class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer = proposer
        self.scorer = scorer
        self.rank = rank

    def execute_model(self, request=None):
        if self.rank == 0:
            k = request["lookahead"]
            broadcast_tensor_dict({"lookahead": k}, src=0)
        else:
            k = broadcast_tensor_dict(src=0)["lookahead"]
        for _ in range(k):
            self.proposer.execute_model(request)
        return self.scorer.execute_model(request)
""",
    good="""\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if self.is_driver_worker:
            data = {"tokens": request["tokens"], "lookahead": request["lookahead"]}
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
        return self.run(data["tokens"]), data["lookahead"]


class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker):
        self.proposer = proposer
        self.scorer = scorer

    def execute_model(self, request=None):
        # The first proposer step carries the lookahead count in its own dict.
        _, k = self.proposer.execute_model(request)
        for _ in range(k - 1):
            self.proposer.execute_model(request)
        return self.scorer.execute_model(request)
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
    yield Finding(
        control.site.path,
        control.site.line,
        control.site.col,
        RULE.code,
        f"{cls.name} broadcasts its own control dict ({_where(control)}), then runs inner "
        f"workers' steps that broadcast too: up to {_count(chosen)}; "
        f"send the control keys in the first inner worker's dict to save a broadcast per "
        f"step (`runnercheck migrate --select {CODEMOD}`)",
    )


CHECK = CheckRule(RULE, check_class=check_class)
