"""RC106 paired-broadcast: More than one step-metadata broadcast per step (worker and runner both broadcast); run `runnercheck migrate`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import cast

from runnercheck.analysis.mergeable import MergeRefusal, pair_refusal
from runnercheck.analysis.model import ClassFacts, ModuleFacts, Role
from runnercheck.analysis.project import BroadcastSite, PathCount, Project
from runnercheck.catalog import Rule
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

RULE = Rule(
    code="RC106",
    name="paired-broadcast",
    tool="check",
    summary="More than one step-metadata broadcast per step (worker and runner both broadcast); run `runnercheck migrate`.",
    why="Each broadcast is a pickled metadata round plus one collective per tensor; merging the worker's and runner's dicts into one broadcast measured +1.3% throughput on 8xH100 in vLLM 0.5.1. Where the driver and the other ranks run different numbers of broadcasts it is a bug (an error); otherwise it is an error only where `runnercheck migrate` takes the pair (the rule asks the merge's own question), and a note naming the refusal where the merge leaves it as found: a runner that broadcasts in several methods (MIG101) or inside `prepare_model_input` (MIG105), a worker that drives no runner found (MIG103), a runner no worker drives (MIG104).",
    bad="""\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    is_driver_worker = True

    def prepare_input_tensors(self, seq_group_metadata_list):
        if self.is_driver_worker:
            input_tokens = self._prepare(seq_group_metadata_list)
            broadcast_tensor_dict({"input_tokens": input_tokens}, src=0)
        else:
            input_tokens = broadcast_tensor_dict(src=0)["input_tokens"]
        return input_tokens

    def execute_model(self, seq_group_metadata_list, kv_caches):
        input_tokens = self.prepare_input_tensors(seq_group_metadata_list)
        return self.model(input_tokens, kv_caches)


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker
        self.model_runner = ModelRunner()

    def execute_model(self, seq_group_metadata_list=None):
        if self.is_driver_worker:
            num_seq_groups = len(seq_group_metadata_list)
            broadcast_tensor_dict({"num_seq_groups": num_seq_groups}, src=0)
        else:
            num_seq_groups = broadcast_tensor_dict(src=0)["num_seq_groups"]
        if num_seq_groups == 0:
            return []
        return self.model_runner.execute_model(seq_group_metadata_list, None)
""",
    good="""\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def execute_model(self, model_input, kv_caches):
        return self.model(model_input["input_tokens"], kv_caches)


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker
        self.model_runner = ModelRunner()

    def execute_model(self, seq_group_metadata_list=None):
        if self.is_driver_worker:
            data = {"num_seq_groups": len(seq_group_metadata_list)}
            data.update(self._prepare(seq_group_metadata_list))
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
        if data["num_seq_groups"] == 0:
            return []
        return self.model_runner.execute_model(data, None)
""",
)


def _where(site: BroadcastSite) -> str:
    return f"{PurePath(site.path).name}:{site.line}"


def _describe(count: PathCount) -> str:
    return ", ".join(_where(s) for s in count.sites) or "none"


def _report_site(project: Project, count: PathCount, runner: ClassFacts | None) -> BroadcastSite:
    """Where to report: the runner's broadcast (the one a merge removes), else the second;
    in any case a site in a reported file when there is one."""
    sites = list(count.sites)
    if project.reportable is not None:
        sites = [s for s in sites if s.path in project.reportable] or sites
    if runner is not None:
        names = {k.name for k in project.mro(runner)}
        for site in sites:
            if site.where.split(".", 1)[0] in names:
                return site
    return sites[1] if len(sites) > 1 else sites[0]


def _counts_text(counts: dict[Role, PathCount]) -> str:
    driver, other = counts["driver"], counts["non-driver"]
    times = "time" if driver.count == 1 else "times"
    joint = "and" if driver.count == other.count else "but"
    return (
        f"{driver.count} {times} per step on the driver path ({_describe(driver)}) {joint} "
        f"{other.count} on the non-driver path ({_describe(other)})"
    )


def _ranks_disagree(subjects: list[_Subject]) -> bool:
    return any(s.counts["driver"].count != s.counts["non-driver"].count for s in subjects)


def _same_as_base(
    project: Project, base: ClassFacts, runner: ClassFacts | None, counts: dict[Role, PathCount]
) -> bool:
    if project.is_abstract(base) or not project.is_worker(base):
        return False
    held = [r for rs in project.runner_candidates(base).values() for r in rs]
    if runner is not None and runner not in held:
        return False
    return project.broadcasts_per_step(base, runner) == counts


def _subjects(project: Project, cls: ClassFacts) -> Iterator[_Subject]:
    """More than one step-metadata broadcast per ``execute_model`` call on a role's path:
    a concrete worker with each runner it may hold, or a runner no worker holds."""
    execute = project.contract.execute_method
    if project.is_abstract(cls) or project.resolve_method(cls, execute) is None:
        return
    if project.is_worker(cls):
        candidates: list[ClassFacts | None] = [
            r for rs in project.runner_candidates(cls).values() for r in rs
        ]
        owner = project.resolve_method(cls, execute)
        base = owner.owner if owner is not None and owner.owner is not cls else None
        for runner in candidates or [None]:
            counts = project.broadcasts_per_step(cls, runner)
            if base is not None and _same_as_base(project, base, runner, counts):
                continue  # reported once, on the worker that defines the step
            if _prepare_is_the_cause(project, runner, counts):
                continue
            if max(c.count for c in counts.values()) > 1:
                subject = cls.name if runner is None else f"{cls.name} and {runner.name}"
                silent = project.silent_worker(cls)
                refusal = pair_refusal(project, cls, runner)
                yield _Subject(subject, counts, runner, silent, refusal)
    elif project.is_runner(cls) and cls not in project.paired_runners():
        counts = project.broadcasts_per_step(cls)
        if max(c.count for c in counts.values()) > 1:
            yield _Subject(cls.name, counts, cls, None, pair_refusal(project, None, cls))


def _prepare_is_the_cause(
    project: Project, runner: ClassFacts | None, counts: dict[Role, PathCount]
) -> bool:
    """The extra broadcast is one the runner's ``prepare_model_input`` runs: RC105's
    cause, reported there once (without it every path broadcasts at most once)."""
    if runner is None:
        return False
    prepare = project.contract.prepare_input_method
    if project.resolve_method(runner, prepare) is None:
        return False
    reached = {(r.site.path, r.site.line) for r in project.collectives_reachable(runner, prepare)}
    if not reached:
        return False
    rest = [
        [s for s in count.sites if (s.path, s.line) not in reached] for count in counts.values()
    ]
    return all(len(sites) <= 1 for sites in rest)


@dataclass(frozen=True)
class _Subject:
    name: str
    counts: dict[Role, PathCount]
    runner: ClassFacts | None
    #: Why the worker's broadcasts never run, or None.
    silent: str | None
    #: Why ``runnercheck migrate`` leaves the pair as found (the merge's own question),
    #: or None when it takes it.
    refusal: MergeRefusal | None = None

    def site(self, project: Project) -> BroadcastSite:
        driver, other = self.counts["driver"], self.counts["non-driver"]
        return _report_site(project, driver if driver.count > 1 else other, self.runner)


Causes = dict[tuple[str, int, int, bool], list[_Subject]]


def _causes(project: Project) -> Causes:
    """Every pair with too many broadcasts, grouped by cause: the broadcast a merge
    removes (one extra broadcast in a shared worker base is one cause for every pair
    that inherits it), live workers apart from silent ones."""
    cached = project.memo.get(RULE.code)
    if cached is None:
        causes: Causes = {}
        for cls in project.all_classes():
            for subject in _subjects(project, cls):
                site = subject.site(project)
                key = (site.path, site.line, site.col, subject.silent is not None)
                causes.setdefault(key, []).append(subject)
        project.memo[RULE.code] = cached = causes
    return cast(Causes, cached)


def check_module(project: Project, module: ModuleFacts) -> Iterator[Finding]:
    """One finding per cause, listing every worker/runner pair it makes broadcast more
    than once per step."""
    causes = _causes(project)
    for (path, line, col, silent), subjects in causes.items():
        if path != module.path:
            continue
        if silent and (path, line, col, False) in causes:
            continue  # told in the error on the same line, not repeated by a note
        first = subjects[0]
        by_counts: dict[str, list[str]] = {}
        for subject in subjects:
            by_counts.setdefault(_counts_text(subject.counts), []).append(subject.name)
        text = "; ".join(
            f"{', '.join(names)} broadcast step metadata {counts}"
            for counts, names in by_counts.items()
        )
        beside = causes.get((path, line, col, True), []) if not silent else []
        if beside:
            names = ", ".join(dict.fromkeys(s.name for s in beside))
            reasons = "; ".join(sorted({str(s.silent) for s in beside}))
            text += f" (so would {names}, but {reasons})"
        if _ranks_disagree(subjects):  # a bug, whatever migrate can do
            yield _finding(
                path,
                line,
                col,
                f"{text}; every rank must run the same broadcasts in a step, else one waits "
                "for a broadcast that is never sent",
                first.silent,
            )
            continue
        refusals = [s.refusal for s in subjects if s.refusal is not None]
        if first.silent is None and refusals and len(refusals) == len(subjects):
            # an inefficiency no fix works on: the merge leaves every pair as found
            refusal = refusals[0]
            how = (
                f"refuses it, {refusal.code}: {refusal.message}"
                if refusal.code
                else f"leaves it alone: {refusal.message}"
            )
            yield Finding(
                path,
                line,
                col,
                RULE.code,
                f"{text}; they could be merged into one broadcast, but no automatic fix applies",
            ).as_note(f"`runnercheck migrate` {how}")
            continue
        yield _finding(
            path,
            line,
            col,
            f"{text}; merge them into one broadcast: run `runnercheck migrate`",
            first.silent,
        )


def _finding(path: str, line: int, col: int, message: str, silent: str | None) -> Finding:
    finding = Finding(path, line, col, RULE.code, message)
    return finding if silent is None else finding.as_note(silent)


CHECK = CheckRule(RULE, check_module=check_module)
