"""The Hypothesis search over a composed step (``A+B+extra:NAME``), through a live group.

An example is one value per part: an instance of each input class, a value of each
extra. Fields of the same name in several inputs get one value (the first input's),
as a worker fills them from one request (``virtual_engine`` in the worker input and
in a model input). After the round trip each part is compared as a single class is
(problems name ``Part.field``); a receiving call that rejects a key another part put
into the dict is reported with the key and both parts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from runnercheck.config import Config
from runnercheck.fuzz import strategies
from runnercheck.fuzz.backend import backend_for
from runnercheck.fuzz.compare import describe
from runnercheck.fuzz.compare import differences as compare
from runnercheck.fuzz.facts import StaticFacts
from runnercheck.fuzz.report import ClassResult, Problem, merge
from runnercheck.fuzz.roundtrip import DriverOutcome, ReceiverOutcome
from runnercheck.fuzz.search import (
    MAX_EXAMPLE,
    SearchOptions,
    backend_hint,
    drive,
    driver_only_rule,
    error_problem,
    example_text,
    job_ids,
    sender_precondition,
    unproven_reason,
    with_hint,
)
from runnercheck.fuzz.snapshot import Items, Snap, Snapshotter
from runnercheck.fuzz.step_roundtrip import StepDriverOutcome, StepJob, StepReceiverOutcome
from runnercheck.fuzz.steps import Step, StepPart, extra_annotation


def step_strategy(
    step: Step, builder: strategies.StrategyBuilder, as_dict_method: str | None = None
) -> SearchStrategy[Any]:
    """Tuples with one value per part (raises StrategyError for what cannot be generated);
    given the conversion's name, each part meets what its conversion asserts."""
    parts: list[SearchStrategy[Any]] = []
    for part in step.parts:
        if part.cls is not None:
            strategy = builder.for_class(part.cls)
            accepts = sender_precondition(part.cls, as_dict_method) if as_dict_method else None
            parts.append(strategy.filter(accepts) if accepts is not None else strategy)
        else:
            where = f"extra {part.key!r}"
            annotation = extra_annotation(part.type_text, f"step {step.name!r}: {where}")
            parts.append(builder.for_annotation(annotation, where, 0, True))

    @st.composite
    def examples(draw: st.DrawFn) -> tuple[Any, ...]:
        return _tie(step.parts, [draw(s) for s in parts], as_dict_method)

    return examples()


def _tie(
    parts: Sequence[StepPart], values: list[Any], as_dict_method: str | None = None
) -> tuple[Any, ...]:
    """Give fields of one name the first input's value in every later input; given the
    conversion's name, also inside the inputs a part holds (a field whose value is an
    input with that conversion, as vLLM's multi-step input holds the single-step one:
    the worker fills both from one request)."""
    shared: dict[str, Any] = {}
    for index, part in enumerate(parts):
        if part.cls is not None:
            values[index] = _tied(values[index], shared, as_dict_method, set())
    return tuple(values)


def _tied(value: Any, shared: dict[str, Any], as_dict_method: str | None, seen: set[int]) -> Any:
    """``value`` with the fields ``shared`` names set to their values (and the inputs it
    holds likewise); its own fields join ``shared`` for the parts after it."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type) or id(value) in seen:
        return value
    seen.add(id(value))
    names = [f.name for f in dataclasses.fields(value) if f.init]
    changes = {n: shared[n] for n in names if n in shared}
    if as_dict_method is not None:
        for name in names:
            inner = getattr(value, name, None)
            if name in changes or not callable(getattr(type(inner), as_dict_method, None)):
                continue
            tied = _tied(inner, shared, as_dict_method, seen)
            if tied is not inner:
                changes[name] = tied
    if changes:
        try:
            value = dataclasses.replace(value, **changes)
        except Exception:
            reject()
    for name in names:
        shared.setdefault(name, getattr(value, name))
    return value


def step_example_text(step: Step, expected: Sequence[Snap]) -> str:
    texts = []
    for part, snap in zip(step.parts, expected, strict=True):
        texts.append(example_text(snap) if part.cls is not None else f"{part.key}={describe(snap)}")
    text = " + ".join(texts)
    return text if len(text) <= 2 * MAX_EXAMPLE else text[: 2 * MAX_EXAMPLE - 3] + "..."


def leak_explanation(
    key: str, failed: int, job: StepJob, producers: dict[str, tuple[str, ...]]
) -> str:
    """Why ``key`` reached part ``failed``'s receiving call: who put it in the dict and
    who should have taken it out first ("" when it is the part's own key)."""
    labels = [p.label for p in job.parts]
    consumer = job.parts[failed].label
    reasons = []
    for owner in producers.get(key, ()):
        index = labels.index(owner)
        part = job.parts[index]
        if index == failed:
            continue
        if part.is_extra:
            reasons.append(
                f"the worker's extra {key!r} is popped only after {consumer} was rebuilt "
                f"from the same dict; pop it before"
            )
        elif index < failed:
            reasons.append(
                f"the key comes from {owner}.{job.as_dict_method}(), and "
                f"{owner}.{job.from_dict_method}() left it in the dict instead of popping it"
            )
        else:
            reasons.append(
                f"the key comes from {owner}.{job.as_dict_method}(), and {owner} reads the "
                f"dict only after {consumer}"
            )
    return "; ".join(reasons)


def _receiver_error(
    receiver: ReceiverOutcome, job: StepJob, producers: dict[str, tuple[str, ...]]
) -> Problem:
    assert receiver.error is not None
    problem = error_problem(receiver.error)
    failed = receiver.failed_part if isinstance(receiver, StepReceiverOutcome) else -1
    if 0 <= failed < len(job.parts) and job.from_dict_method in receiver.error.stage:
        hint = backend_hint(job.parts[failed].cls, job.from_dict_method, job.attn_backend)
        problem = with_hint(problem, hint)
    if problem.field and failed >= 0:
        reason = leak_explanation(problem.field, failed, job, producers)
        if reason:
            return Problem(
                problem.code, f"{problem.message}; {reason}", problem.field, problem.ranks
            )
    return problem


def _taken_by_earlier(
    part: StepPart,
    path: str,
    receiver: ReceiverOutcome,
    job: StepJob,
    producers: dict[str, tuple[str, ...]],
) -> str:
    """For a lost field whose key another part also produces: the earlier part that
    popped the key before this part could read it ("" if none did)."""
    if not isinstance(receiver, StepReceiverOutcome):
        return ""
    key = path[len(part.label) + 1 :].split(".", 1)[0].split("[", 1)[0]
    index = job.parts.index(part)
    if key not in producers or len(receiver.keys_seen) <= index:
        return ""
    for earlier in range(index):
        if key in receiver.keys_seen[earlier] and key not in receiver.keys_seen[earlier + 1]:
            taker = job.parts[earlier]
            by = (
                f"as the worker's extra {key!r}"
                if taker.is_extra
                else f"by {taker.label}.{job.from_dict_method}()"
            )
            return f"; key {key!r} was popped {by} before {part.label} read the dict"
    return ""


def evaluate_step(
    job: StepJob,
    expected: Sequence[Snap],
    outcome: DriverOutcome,
    facts: StaticFacts | None = None,
) -> list[Problem]:
    """Every problem a step's outcome shows against the expected snapshots (one per part),
    each part's fields judged with the static facts as the class alone is."""
    problems: list[Problem] = []
    producers = outcome.producers if isinstance(outcome, StepDriverOutcome) else {}
    if outcome.error is not None:
        problems.append(error_problem(outcome.error))
    for diff in outcome.mutation:
        message = f"{job.as_dict_method}() changed the sender's object: {diff.change()}"
        problems.append(Problem("RC305", message, diff.path, (0,)))
    for diff in outcome.nondeterministic:
        message = f"two merges of the step's dicts from one input differ: {diff.text()}"
        problems.append(Problem("RC304", message, "", (0,)))
    for receiver in outcome.receivers:
        ranks = (receiver.rank,)
        if receiver.error is not None:
            problems.append(_receiver_error(receiver, job, producers))
        if isinstance(receiver.rebuilt, Items):
            for part, sent, got in zip(job.parts, expected, receiver.rebuilt.items, strict=False):
                for diff in compare(sent, got, part.label):
                    inner = diff.path[len(part.label) + 1 :]
                    if facts is not None and part.cls is not None:
                        if facts.rebuilt_in_part(part.cls, inner):
                            continue  # a part of a field that the dict does not send, by design
                    if diff.path == part.label and diff.aspect == "type":
                        message = f"rebuilt as {diff.actual}, sent {diff.expected}"
                        problems.append(Problem("RC303", message, part.label, ranks))
                    else:
                        code = "RC301" if diff.lost else "RC303"
                        message = diff.change()
                        if diff.lost:
                            message += _taken_by_earlier(part, diff.path, receiver, job, producers)
                        found = unproven_reason(
                            Problem(code, message, inner, ranks), part.cls, facts
                        )
                        problems.append(Problem(code, found.message, diff.path, ranks))
        for diff in receiver.nondeterministic:
            message = f"two runs of the step's receiving calls on one dict differ: {diff.text()}"
            problems.append(Problem("RC304", message, "", ranks))
    return merge(problems)


def search_step(
    group: Any,
    step: Step,
    options: SearchOptions,
    config: Config,
    builder: strategies.StrategyBuilder,
) -> ClassResult:
    """Fuzz one composed step through ``group``; never raises for what its parts do wrong."""
    contract = config.contract()
    # without a backend given, the stand-in of the first part that rebuilds its
    # attention metadata with one (the model input), as for that class alone
    backends = (
        backend_for(part.cls, contract.from_dict_method, None)
        for part in step.parts
        if part.cls is not None
    )
    attn_backend = options.attn_backend
    if attn_backend is None:
        attn_backend = next((b for b in backends if b is not None), None)
    job = StepJob(
        next(job_ids),
        step.parts,
        contract.as_dict_method,
        contract.from_dict_method,
        attn_backend,
        step.sys_path,
    )
    strategy = step_strategy(step, builder, contract.as_dict_method)
    snapshotter = Snapshotter(driver_only_rule(config, options.facts), True, options.device)

    def expect(example: Any) -> tuple[list[Snap], Callable[[], str]]:
        expected = [snapshotter.take(value) for value in example]
        return expected, functools.partial(step_example_text, step, expected)

    def judge(expected: list[Snap], outcome: DriverOutcome) -> list[Problem]:
        return evaluate_step(job, expected, outcome, options.facts)

    return drive(group, job, step.name, strategy, options, expect, judge)
