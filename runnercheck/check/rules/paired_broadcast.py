"""RC106 paired-broadcast: More than one step-metadata broadcast per step (worker and runner both broadcast); run `runnercheck migrate`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath

from runnercheck.analysis.model import ClassFacts, Role
from runnercheck.analysis.project import BroadcastSite, PathCount, Project
from runnercheck.catalog import Rule
from runnercheck.check.rules.base import CheckRule
from runnercheck.findings import Finding

RULE = Rule(
    code="RC106",
    name="paired-broadcast",
    tool="check",
    summary="More than one step-metadata broadcast per step (worker and runner both broadcast); run `runnercheck migrate`.",
    why="Each broadcast is a pickled metadata round plus one collective per tensor; merging the worker's and runner's dicts into one broadcast measured +1.3% throughput on 8xH100 in vLLM 0.5.1.",
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


def _finding(
    project: Project, subject: str, counts: dict[Role, PathCount], runner: ClassFacts | None
) -> Finding | None:
    driver, other = counts["driver"], counts["non-driver"]
    worst = driver if driver.count > 1 else other
    if worst.count <= 1:
        return None
    site = _report_site(project, worst, runner)
    return Finding(
        site.path,
        site.line,
        site.col,
        RULE.code,
        f"{subject} broadcast step metadata {driver.count} times per step on the driver "
        f"path ({_describe(driver)}) and {other.count} on the non-driver path "
        f"({_describe(other)}); merge them into one broadcast: run `runnercheck migrate`",
    )


def _same_as_base(
    project: Project, base: ClassFacts, runner: ClassFacts | None, counts: dict[Role, PathCount]
) -> bool:
    if project.is_abstract(base) or not project.is_worker(base):
        return False
    held = [r for rs in project.runner_candidates(base).values() for r in rs]
    if runner is not None and runner not in held:
        return False
    return project.broadcasts_per_step(base, runner) == counts


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
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
            subject = cls.name if runner is None else f"{cls.name} and {runner.name}"
            finding = _finding(project, subject, counts, runner)
            if finding is not None:
                silent = project.silent_worker(cls)
                yield finding if silent is None else finding.as_note(silent)
    elif project.is_runner(cls) and cls not in project.paired_runners():
        finding = _finding(project, cls.name, project.broadcasts_per_step(cls), cls)
        if finding is not None:
            yield finding


CHECK = CheckRule(RULE, check_class=check_class)
