"""RC105 collective-in-prepare and RC106 paired-broadcast."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath

from runnercheck.analysis.model import ClassFacts, Role
from runnercheck.analysis.project import BroadcastSite, PathCount, Project
from runnercheck.findings import Finding


def collective_in_prepare(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A collective reachable from ``prepare_model_input`` through the class's own methods."""
    prepare = project.contract.prepare_input_method
    if prepare not in cls.methods:
        return
    for reached in project.collectives_reachable(cls, prepare):
        site = reached.site
        via = f" (via {' -> '.join(reached.chain[1:])})" if len(reached.chain) > 1 else ""
        yield Finding(
            site.path,
            site.line,
            site.col,
            "RC105",
            f"collective `{site.callee}` runs in {cls.name}.{prepare}{via}: only the "
            "driver prepares inputs, so no other rank matches it",
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
        "RC106",
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


def paired_broadcast(project: Project, cls: ClassFacts) -> Iterator[Finding]:
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
                yield finding
    elif project.is_runner(cls) and cls not in project.paired_runners():
        finding = _finding(project, cls.name, project.broadcasts_per_step(cls), cls)
        if finding is not None:
            yield finding
