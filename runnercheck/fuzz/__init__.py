"""``runnercheck fuzz``: round trips of input classes through a real multi-process broadcast.

Public API: :func:`fuzz` (a whole run, of classes and composed steps), :class:`FuzzOptions`,
:func:`register_strategy`, :class:`LocalGroup` (a reusable group of ranks on this machine),
:func:`resolve_step` (a composed step, ``A+B+extra:NAME``).
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runnercheck.config import Config
from runnercheck.errors import ConfigError, UsageError
from runnercheck.fuzz.cuda_standin import cuda_standins
from runnercheck.fuzz.facts import StaticFacts, analyse, around
from runnercheck.fuzz.group import EnvGroup, GroupLost, LocalGroup, torchrun_rank
from runnercheck.fuzz.ranks import Settings
from runnercheck.fuzz.report import ClassResult, Problem, RunReport
from runnercheck.fuzz.search import SearchOptions, search
from runnercheck.fuzz.step_search import search_step, step_strategy
from runnercheck.fuzz.steps import Step, resolve_step
from runnercheck.fuzz.strategies import (
    ALL_DTYPES,
    StrategyBuilder,
    TensorOptions,
    load_configured,
    register_strategy,
    unregister_strategy,
)
from runnercheck.fuzz.targets import Target, Unrunnable, resolve_all

__all__ = [
    "ClassResult",
    "FuzzOptions",
    "GroupLost",
    "LocalGroup",
    "Problem",
    "RunReport",
    "Step",
    "Target",
    "Unrunnable",
    "fuzz",
    "register_strategy",
    "resolve_all",
    "resolve_step",
    "unregister_strategy",
]


@dataclass(frozen=True)
class FuzzOptions:
    world_size: int = 2
    device: str = "cpu"
    examples: int = 100
    seed: int | None = None
    deadline: float = 60.0
    rendezvous_timeout: float = 120.0
    attn_backend: Any = None
    #: Driver-only fields the static analysis proves (None: analyse the files beside
    #: the targets' own files; see :mod:`runnercheck.fuzz.facts`).
    facts: StaticFacts | None = None
    #: False: only declared driver-only fields are skipped (no static analysis).
    static_facts: bool = True

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.examples < 1:
            raise ValueError("world_size and examples must be at least 1")
        for name in ("deadline", "rendezvous_timeout"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number of seconds above 0, not {value}")

    def settings(self) -> Settings:
        return Settings(self.world_size, self.device, self.deadline, self.rendezvous_timeout)


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


def make_group(options: FuzzOptions) -> LocalGroup | EnvGroup:
    """Under torchrun, this process's group (it must be rank 0); else ranks spawned here."""
    if torchrun_rank() is not None:
        settings = Settings(
            int(os.environ["WORLD_SIZE"]),
            options.device,
            options.deadline,
            options.rendezvous_timeout,
        )
        return EnvGroup(settings)
    return LocalGroup(options.settings())


def fuzz(
    targets: Sequence[Target | Step | Unrunnable],
    options: FuzzOptions,
    config: Config | None = None,
    group: LocalGroup | EnvGroup | None = None,
    extra_strategies: dict[Any, Any] | None = None,
) -> RunReport:
    """Fuzz each target's class; ``group`` (started or not) is reused and left open,
    else one is made for the run and closed after it. A class of a swept path that
    cannot run (:class:`Unrunnable`, or no strategy for it) is one result with the
    reason; any other target's error raises."""
    with cuda_standins(options.device):
        return _fuzz(targets, options, config, group, extra_strategies)


def _fuzz(
    targets: Sequence[Target | Step | Unrunnable],
    options: FuzzOptions,
    config: Config | None,
    group: LocalGroup | EnvGroup | None,
    extra_strategies: dict[Any, Any] | None,
) -> RunReport:
    config = config or Config()
    seed = options.seed if options.seed is not None else new_seed()
    overrides: dict[Any, Any] = dict(load_configured(config.fuzz_strategies))
    overrides.update(extra_strategies or {})
    facts = static_facts(targets, options, config)
    checked: list[Target | Step | Unrunnable] = []
    for target in targets:  # fail on unsupported annotations before starting any process
        if isinstance(target, Step):
            try:
                step_strategy(target, _builder(overrides, facts))
            except Exception as exc:
                if not target.swept or isinstance(exc, ConfigError):
                    raise
                target = Unrunnable(target.name, _reason(exc))
        elif isinstance(target, Target):
            try:
                _builder(overrides, facts).for_class(target.cls)
            except Exception as exc:
                if not target.swept or isinstance(exc, ConfigError):
                    raise
                target = Unrunnable(target.name, _reason(exc))
        checked.append(target)
    targets = checked
    own = group is None
    active = group if group is not None else make_group(options)
    try:
        report = _run(active, targets, options, config, seed, overrides, facts)
    except BaseException:
        if own:
            active.close(force=True)
        raise
    if own:
        active.close(force=False)
    return report


def _builder(
    overrides: dict[Any, Any],
    facts: StaticFacts | None,
    tensor_options: TensorOptions | None = None,
) -> StrategyBuilder:
    """A strategy builder: a field the analysis proves driver-only that cannot be
    generated keeps its default."""
    builder = StrategyBuilder(overrides, tensor_options)
    builder.stays_on_driver = facts.driver_only if facts is not None else None
    return builder


def _reason(exc: BaseException) -> str:
    """An error as one line (a usage error's own text, else its type and text)."""
    text = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def static_facts(
    targets: Sequence[Target | Step | Unrunnable], options: FuzzOptions, config: Config
) -> StaticFacts | None:
    """The facts the run uses: the given ones, else those of the files beside the
    targets' own (never imported for it)."""
    if options.facts is not None or not options.static_facts:
        return options.facts
    classes: list[type] = []
    for target in targets:
        if isinstance(target, Step):
            classes.extend(part.cls for part in target.parts if part.cls is not None)
        elif isinstance(target, Target):
            classes.append(target.cls)
    return analyse(around(classes), config.contract())


def _run(
    active: LocalGroup | EnvGroup,
    targets: Sequence[Target | Step | Unrunnable],
    options: FuzzOptions,
    config: Config,
    seed: int,
    overrides: dict[Any, Any],
    facts: StaticFacts | None,
) -> RunReport:
    info = active.start()
    carried = tuple(info.dtypes)
    tensor_options = TensorOptions(dtypes=carried, pickled_dtypes=ALL_DTYPES)
    report = RunReport(
        info.world_size,
        options.device,
        info.transport,
        options.examples,
        seed,
        options.deadline,
        not_generated=tuple(str(d).removeprefix("torch.") for d in ALL_DTYPES if d not in carried),
        sweep=any(isinstance(t, Unrunnable) or getattr(t, "swept", False) for t in targets),
    )
    search_options = SearchOptions(
        options.examples,
        seed,
        options.device,
        options.attn_backend,
        facts,
    )
    for target in targets:
        start = time.perf_counter()
        if isinstance(target, Unrunnable):
            report.results.append(ClassResult(target.name, seed, error=target.reason))
            continue
        builder = _builder(overrides, facts, tensor_options)
        try:
            if isinstance(target, Step):
                result = search_step(active, target, search_options, config, builder)
            else:
                result = search(active, target, search_options, config, builder)
        except UsageError as exc:
            if not target.swept:
                raise
            error = _reason(exc).removeprefix(f"{target.name}: ")
            result = ClassResult(target.name, seed, error=error)
        result.seconds = time.perf_counter() - start
        report.results.append(result)
    return report
