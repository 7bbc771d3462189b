"""The Hypothesis search over one input class, through a live process group.

Each example Hypothesis draws goes to the driver rank and through the broadcast;
the outcome is compared here, field by field, against a snapshot of the original.
Hypothesis draws the next examples while the ranks round-trip the ones before
(:func:`drive`; a problem found that way is searched again in step). A problem raises
:class:`RoundTripFailure`, which Hypothesis shrinks (replaying examples through the
same group, one at a time) down to a minimal example; the seed replays it.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import inspect
import itertools
import re
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import errors as hypothesis_errors

from runnercheck.config import Config
from runnercheck.contract import is_driver_only_comment, is_driver_only_metadata
from runnercheck.errors import UsageError
from runnercheck.fuzz import prng, strategies, transfer
from runnercheck.fuzz.backend import backend_for
from runnercheck.fuzz.compare import describe
from runnercheck.fuzz.compare import differences as compare
from runnercheck.fuzz.explain import explain
from runnercheck.fuzz.facts import StaticFacts
from runnercheck.fuzz.group import GroupLost
from runnercheck.fuzz.ranks import UnsendableJob
from runnercheck.fuzz.report import ClassResult, Problem, merge
from runnercheck.fuzz.roundtrip import DriverOutcome, Job, RankError, takes_backend
from runnercheck.fuzz.snapshot import Record, Snap, Snapshotter
from runnercheck.fuzz.targets import Target

job_ids = itertools.count(1)


class RoundTripFailure(Exception):
    def __init__(self, problems: list[Problem], example: str) -> None:
        super().__init__("; ".join(p.text() for p in problems))
        self.problems = problems
        self.example = example


@dataclass(frozen=True)
class SearchOptions:
    examples: int = 100
    seed: int = 0
    device: str = "cpu"
    attn_backend: Any = None
    #: What the static analysis knows of the classes (driver-only fields it proves).
    facts: StaticFacts | None = None


def driver_only_rule(
    config: Config, facts: StaticFacts | None = None
) -> Callable[[type, dataclasses.Field[Any]], bool]:
    """Whether a field stays on the driver: declared so (marker, comment, the
    configuration's ``driver_only``) or proven so by the static analysis."""

    def rule(cls: type, f: dataclasses.Field[Any]) -> bool:
        if is_driver_only_metadata(f.metadata, config.driver_only_key):
            return True
        if facts is not None and facts.driver_only(cls, f.name):
            return True
        if any(f.name in commented_driver_only(klass) for klass in cls.__mro__):
            return True
        return any(config.is_driver_only(klass.__name__, f.name) for klass in cls.__mro__)

    return rule


@functools.cache
def commented_driver_only(cls: type) -> frozenset[str]:
    """The fields the class body declares driver-only with a ``# Driver-only: ...``
    comment above them (read from its source, as ``check`` reads it); empty when the
    source cannot be read."""
    if not dataclasses.is_dataclass(cls):
        return frozenset()
    try:
        lines, _ = inspect.getsourcelines(cls)
        text = textwrap.dedent("".join(lines))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError, ValueError):
        return frozenset()
    body = tree.body[0] if tree.body and isinstance(tree.body[0], ast.ClassDef) else None
    if body is None:
        return frozenset()
    source = text.splitlines()
    return frozenset(
        stmt.target.id
        for stmt in body.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and is_driver_only_comment(source, stmt.lineno)
    )


_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '([^']+)'")


def error_problem(error: RankError, code: str = "RC302") -> Problem:
    match = _UNEXPECTED_KEYWORD.search(error.message)
    field = match.group(1) if match else ""
    stage = error.stage
    return Problem(
        code, f"{stage} raised {error.text()}", field, (error.rank,) if error.rank >= 0 else ()
    )


def backend_hint(cls: type | None, from_dict_method: str, attn_backend: Any) -> str:
    """What to add to an error raised by ``cls``'s ``from_dict_method`` when it takes an
    ``attn_backend`` and none was given: engines rebuild the attention metadata of the
    received dict with it, and without one the dict's attention keys reach ``cls(...)``."""
    if cls is None or attn_backend is not None:
        return ""
    if not takes_backend(getattr(cls, from_dict_method, None)):
        return ""
    return (
        f"; {cls.__qualname__}.{from_dict_method}() takes an attn_backend and none was "
        "given: it may need the engine's attention backend to rebuild the attention "
        "metadata (give one with --attn-backend MODULE:ATTR)"
    )


def with_hint(problem: Problem, hint: str) -> Problem:
    if not hint:
        return problem
    return Problem(problem.code, problem.message + hint, problem.field, problem.ranks)


def sender_precondition(cls: type, as_dict_method: str) -> Callable[[Any], bool] | None:
    """When ``cls``'s conversion asserts something of the input it sends
    (``assert self.frozen_model_input is not None``: what the driver always builds), a
    test of whether an example meets it; examples that do not are not generated (the
    driver never sends them). None when the conversion asserts nothing."""
    method = getattr(cls, as_dict_method, None)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))  # type: ignore[arg-type]
    except (OSError, TypeError, SyntaxError):
        return None
    if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
        return None

    def accepts(example: Any) -> bool:
        try:
            getattr(example, as_dict_method)()
        except AssertionError:
            return False
        except Exception:  # any other failure is the round trip's to report
            return True
        return True

    return accepts


def unproven_reason(problem: Problem, cls: type | None, facts: StaticFacts | None) -> Problem:
    """A lost field that the class's dict leaves out, with why the analysis could not
    prove it driver-only."""
    if problem.code != "RC301" or facts is None or cls is None:
        return problem
    found = facts.unproven_at(cls, problem.field)
    if found is None:
        return problem
    owner, reason = found
    return with_hint(problem, f"; {owner.__qualname__}'s dict does not send it, and {reason}")


def evaluate(
    expected: Snap, outcome: DriverOutcome, job: Job, facts: StaticFacts | None = None
) -> list[Problem]:
    """Every problem an outcome shows against the expected snapshot."""
    problems: list[Problem] = []
    if outcome.error is not None:
        problems.append(error_problem(outcome.error))
    for diff in outcome.mutation:
        problems.append(
            Problem(
                "RC305",
                f"{job.as_dict_method}() changed the sender's object: {diff.change()}",
                diff.path,
                (0,),
            )
        )
    for diff in outcome.nondeterministic:
        problems.append(
            Problem(
                "RC304",
                f"two calls of {job.as_dict_method}() on one input differ: {diff.text()}",
                "",
                (0,),
            )
        )
    for receiver in outcome.receivers:
        if receiver.error is not None:
            hint = ""
            if receiver.error.stage.startswith(job.from_dict_method):
                hint = backend_hint(job.cls, job.from_dict_method, job.attn_backend)
            problems.append(with_hint(error_problem(receiver.error), hint))
        if receiver.rebuilt is not None:
            for diff in compare(expected, receiver.rebuilt):
                if (
                    facts is not None
                    and job.cls is not None
                    and facts.rebuilt_in_part(job.cls, diff.path)
                ):
                    continue  # a part of a field that the dict does not send, by design
                if diff.path == "" and diff.aspect == "type":
                    message = f"rebuilt as {diff.actual}, sent {diff.expected}"
                    problems.append(Problem("RC303", message, "", (receiver.rank,)))
                else:
                    code = "RC301" if diff.lost else "RC303"
                    problem = Problem(code, diff.change(), diff.path, (receiver.rank,))
                    problems.append(unproven_reason(problem, job.cls, facts))
        for diff in receiver.nondeterministic:
            problems.append(
                Problem(
                    "RC304",
                    f"two calls of {job.from_dict_method}() on one dict differ: {diff.text()}",
                    "",
                    (receiver.rank,),
                )
            )
    return merge(problems)


#: Longest example text shown.
MAX_EXAMPLE = 600


def example_text(snap: Snap) -> str:
    """The example as ``Class(field=value, ...)``; fields at their defaults (also in
    nested dataclasses) are left out."""
    text = _example(snap, 0)
    return text if len(text) <= MAX_EXAMPLE else text[: MAX_EXAMPLE - 3] + "..."


def _example(snap: Snap, depth: int) -> str:
    if not isinstance(snap, Record) or depth > 3:
        return describe(snap)
    defaults = dict(snap.defaults)
    shown = []
    for name, value in snap.fields:
        default = defaults.get(name)
        if default is not None and not compare(default, value, limit=1):
            continue
        shown.append(f"{name}={_example(value, depth + 1)}")
    return f"{snap.type.rsplit('.', 1)[-1]}({', '.join(shown)})"


def search(
    group: Any,
    target: Target,
    options: SearchOptions,
    config: Config,
    builder: strategies.StrategyBuilder,
) -> ClassResult:
    """Fuzz one class through ``group``; never raises for what the class does wrong."""
    contract = config.contract()
    job = Job(
        next(job_ids),
        target.cls,
        contract.as_dict_method,
        contract.from_dict_method,
        backend_for(target.cls, contract.from_dict_method, options.attn_backend),
        target.sys_path,
    )
    strategy = builder.for_class(target.cls)
    accepts = sender_precondition(target.cls, contract.as_dict_method)
    if accepts is not None:
        strategy = strategy.filter(accepts)
    snapshotter = Snapshotter(driver_only_rule(config, options.facts), True, options.device)

    def expect(example: Any) -> tuple[Snap, Callable[[], str]]:
        expected = snapshotter.take(example)
        return expected, functools.partial(example_text, expected)

    #: Fields whose problems an earlier search reported: the next one looks past them.
    reported: set[str] = set()

    def judge(expected: Snap, outcome: DriverOutcome) -> list[Problem]:
        problems = evaluate(expected, outcome, job, options.facts)
        return [p for p in problems if _top_field(p.field) not in reported]

    first = drive(group, job, target.name, strategy, options, expect, judge)
    result = first
    for _ in range(MAX_SEARCHES - 1):
        fields = {_top_field(p.field) for p in result.problems}
        if not fields or "" in fields or any(p.code == "RC306" for p in result.problems):
            break  # nothing more to look past (an error of no one field ends the class)
        reported.update(fields)
        job = dataclasses.replace(job, job_id=next(job_ids))
        result = drive(group, job, target.name, strategy, options, expect, judge)
        if not result.problems:
            break
        first.problems = merge([*first.problems, *result.problems])
        label = "minimal example" if result.shrunk else "example (not shrunk)"
        shown = ", ".join(sorted({p.field for p in result.problems}))
        first.note = "\n".join(
            line for line in (first.note, f"{label} for {shown}: {result.example}") if line
        )
    return first


#: Searches of one class at most: each after the first looks past the fields whose
#: problems the ones before reported, so that every problem of the class is reported,
#: not only the first one shrinking settles on.
MAX_SEARCHES = 4


def _top_field(path: str) -> str:
    """The input's own field a problem's field path starts with."""
    return path.partition(".")[0].partition("[")[0]


#: Examples out with the ranks at once while the search runs ahead (up to this many,
#: as long as they fit in rank 0's pipe): Hypothesis generates while the ranks
#: round-trip the examples before, and when a round trip is slow now and then (the
#: ranks share the machine's cores with this process), the ranks find the next
#: examples queued instead of this process waiting for the outcome. 0: no run-ahead
#: (each example judged before the next is generated), as the search runs again after
#: a problem found ahead.
LOOKAHEAD = 8


class _FoundAhead(BaseException):
    """A problem found while the search ran ahead of the outcomes (in the outcome of
    an earlier example, or raised by this one): the search stops (a BaseException:
    Hypothesis must not shrink the example at hand, which may not be the one that
    failed) and runs again in step."""

    def __init__(self, failure: RoundTripFailure | None) -> None:
        super().__init__(str(failure or ""))
        self.failure = failure


def _load_errors(errors: list[RankError]) -> str:
    """The ranks' errors loading the class, one clause per distinct error."""
    by_text: dict[str, list[int]] = {}
    for error in errors:
        by_text.setdefault(error.text(), []).append(error.rank)
    return "; ".join(
        f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))} "
        f"cannot load the class: {text}"
        for text, ranks in by_text.items()
    )


def drive(
    group: Any,
    job: Any,
    name: str,
    strategy: Any,
    options: SearchOptions,
    expect: Callable[[Any], tuple[Any, Callable[[], str]]],
    judge: Callable[[Any, DriverOutcome], list[Problem]],
) -> ClassResult:
    """The Hypothesis search of one job through ``group``: ``expect`` pictures an
    example (what receivers must rebuild, and a function giving its text, called only
    for an example that is reported), ``judge`` lists the problems of its outcome.

    The search runs ahead: while the ranks round-trip an example, Hypothesis generates
    the next one here and hands it to rank 0 (up to :data:`LOOKAHEAD` out at once, as
    long as they fit in rank 0's pipe); the outcome of the oldest is judged before one
    more goes out. A problem found that way stops the search, which
    runs again from the same seed in step (each example judged before the next is
    generated): the same examples up to the failing one, which Hypothesis shrinks. A
    rank lost on an example newer than the failing one (which a search in step never
    sends) is not reported: the group starts again for the search in step. With a fixed
    seed, Hypothesis's next example depends only on the examples before it
    and their outcomes (all passed, up to the failing one); health checks are off and
    there is no deadline, so time does not change the sequence either."""
    result = ClassResult(name, options.seed)
    try:
        errors = group.start_job(job)
    except GroupLost as lost:
        result.problems = [Problem("RC306", lost.message, "", _ranks(lost))]
        result.note = lost.detail
        return result
    except UnsendableJob as exc:
        raise UsageError(
            f"{name}: cannot send the class to the ranks, which import it by its module "
            f"and qualified name ({exc})"
        ) from None
    if errors:
        # the class cannot run where the ranks are: not a finding about its dict
        raise UsageError(f"{name}: {_load_errors(errors)}")
    timings = result.timings
    state: dict[str, Any] = {"last": time.perf_counter(), "example": str}
    #: The examples out with the ranks, oldest first: (expected, text, when it went out).
    pending: list[tuple[Any, Callable[[], str], float]] = []

    def settle() -> None:
        """Collect and judge the outcome of the oldest example that is out."""
        expected, text, sent = pending.pop(0)
        state["example"] = text
        try:
            outcome = group.collect()
        except GroupLost:
            pending.clear()  # the group is gone, and the outcomes still out with it
            raise
        back = time.perf_counter()
        problems = judge(expected, outcome)
        done = time.perf_counter()
        timings.round_trip += back - sent
        timings.broadcast += outcome.broadcast_seconds
        timings.comparison += done - back
        if problems:
            raise RoundTripFailure(problems, text())

    def drain() -> None:
        """Collect the outcomes still out, unjudged (the search is over)."""
        while pending:
            _, text, _ = pending.pop(0)
            state["example"] = text
            try:
                group.collect()
            except GroupLost:
                pending.clear()
                raise

    def drain_newer() -> None:
        """Collect, unjudged, the outcomes of the examples out that are newer than one
        that failed. A search in step never sends them: if one of them loses the group
        (a rank that blocks or dies on it), the search in step starts it again, where
        the group can start again (else the loss is reported)."""
        try:
            drain()
        except GroupLost:
            if not group.starts_again:
                raise
            state["lost"] = True

    def check(example: Any, ahead: bool) -> None:
        start = time.perf_counter()
        timings.generation += start - state["last"]
        result.examples += 1
        state["own"] = True
        expected, text = expect(example)
        try:
            payload = transfer.dumps(example)
        except Exception as exc:
            problem = Problem(
                "RC302",
                f"the example cannot be handed to rank 0 (pickling "
                f"failed: {type(exc).__name__}: {exc})",
                "",
                (0,),
            )
            raise RoundTripFailure([problem], text()) from None
        timings.comparison += time.perf_counter() - start
        state["own"] = False
        # ahead, up to LOOKAHEAD examples are out at once, while they fit in rank 0's pipe
        while pending and not (ahead and len(pending) < LOOKAHEAD and group.room(len(payload))):
            settle()
        state["example"] = text
        group.submit(payload)
        pending.append((expected, text, time.perf_counter()))
        if not ahead:
            settle()
        state["last"] = time.perf_counter()

    def check_ahead(example: Any) -> None:
        try:
            check(example, True)
        except Exception as exc:
            failure = exc if isinstance(exc, RoundTripFailure) else None
            # the examples still out: older than this one if it failed on its own (one
            # of them failed first, if any did), else newer than the one that failed
            older = state["own"]
            while pending and older:
                try:
                    settle()
                except RoundTripFailure as earlier:
                    failure, older = earlier, False
            if failure is None:
                drain()
            else:
                drain_newer()
            raise _FoundAhead(failure) from None

    def in_step(example: Any) -> None:
        check(example, False)

    def restart() -> None:
        """Start the job again on a group that was lost (and starts afresh)."""
        errors = group.start_job(job)
        if errors:
            raise GroupLost("the ranks could not load the class again: " + errors[0].text())

    def ahead_then_in_step() -> None:
        """The search run ahead; after a problem found that way, run again in step."""
        try:
            _search(strategy, options, check_ahead)
            try:
                while pending:
                    settle()
            except RoundTripFailure:
                drain_newer()
                raise
        except (_FoundAhead, RoundTripFailure) as found:
            first = found.failure if isinstance(found, _FoundAhead) else found
            if state.pop("lost", False):
                restart()
            # the examples counted are the search in step's, as if it had been the only one
            result.examples = 0
            _search(strategy, options, in_step)
            if first is not None:  # not reproduced in step: the problem as found
                result.problems = merge(
                    [
                        *first.problems,
                        Problem(
                            "RC304",
                            "the failure did not reproduce when the example was replayed",
                        ),
                    ]
                )
                result.example = first.example

    strategies.last_construction_error.clear()
    # Hypothesis makes many objects that live to the end of the search: the cyclic
    # collector would walk them again and again; the global random generators are
    # seeded for each example but saved and restored once (prng)
    with _fewer_collections(), prng.seeded_once():
        try:
            if LOOKAHEAD > 0:
                ahead_then_in_step()
            else:
                _search(strategy, options, in_step)
        except RoundTripFailure as failure:
            result.problems = failure.problems
            result.example = failure.example
            result.shrunk = True
        except GroupLost as lost:
            result.problems = [Problem("RC306", lost.message, "", _ranks(lost))]
            result.example = state["example"]()
            result.note = "not shrunk: the group cannot be reused after a rank failure"
            if lost.detail:
                result.note += "\n" + lost.detail
        except hypothesis_errors.Flaky as flaky:
            inner = _inner_failure(flaky)
            result.problems = merge(
                (inner.problems if inner else [])
                + [Problem("RC304", "the failure did not reproduce when the example was replayed")]
            )
            result.example = inner.example if inner else state["example"]()
        except hypothesis_errors.Unsatisfiable:
            drain()  # examples that went out: their outcomes must not meet the next job
            last = strategies.last_construction_error
            reason = f": {type(last[0]).__name__}: {last[0]}" if last else ""
            raise UsageError(f"{name}: no generated example could be constructed{reason}") from None
        except Exception as exc:  # a strategy raised, or snapshotting an example did
            with contextlib.suppress(GroupLost):
                drain()
            where = _raised_at(exc)
            raise UsageError(
                f"{name}: making an example raised {type(exc).__name__}: "
                f"{' '.join(str(exc).split())}{where}{explain(exc)}"
            ) from None
    return result


def _raised_at(exc: BaseException) -> str:
    """`` at FILE:LINE`` of the innermost frame outside Hypothesis and this package,
    preferring the code under test to the packages it calls (torch)."""
    import traceback

    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if "/hypothesis/" not in f.filename and "/runnercheck/fuzz/" not in f.filename
    ]
    own = [f for f in frames if "-packages/" not in f.filename]
    frames = own or frames
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], 20_000), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


def _search(strategy: Any, options: SearchOptions, check: Callable[[Any], None]) -> None:
    """Run Hypothesis over ``strategy`` with the run's seed and number of examples."""
    test = settings(
        max_examples=options.examples,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )(seed(options.seed)(given(strategy)(check)))
    test()


def _ranks(lost: GroupLost) -> tuple[int, ...]:
    return (lost.rank,) if lost.rank is not None else ()


def _inner_failure(exc: BaseException) -> RoundTripFailure | None:
    if isinstance(exc, RoundTripFailure):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _inner_failure(inner)
        if found is not None:
            return found
    return None
