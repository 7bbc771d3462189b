"""The collective schedule (:mod:`runnercheck.analysis.schedule`): each role's paths as
the collectives it runs in order, with the decisions that select them, and the
comparison of the roles' paths (:meth:`Schedules.disagreements`), on small wrappers:
which role runs which branch (the driver flag, a rank test), a value received from a
broadcast (taken alike by all ranks) against one only the driver has (local), the
engine's state, and loop counts kept as written."""

from __future__ import annotations

import pytest

from runnercheck.analysis.model import Role
from runnercheck.analysis.project import ROLES
from runnercheck.analysis.schedule import (
    Count,
    Decision,
    Disagreement,
    Schedule,
    SchedulePath,
    Schedules,
    consistent,
    schedules,
)
from tests.analysis.sources import class_named, project_of

INNER = """\
from vllm.distributed import broadcast_tensor_dict


class InnerWorker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": request.tokens}, src=0)
        else:
            broadcast_tensor_dict(src=0)

"""

#: A wrapper whose driver sends the control values every rank branches on; BRANCH is
#: the test that decides whether the proposer runs (the scorer always does).
WRAPPER = (
    INNER
    + """
class SpecWorker:
    def __init__(self, is_driver_worker, use_spec):
        self.is_driver_worker = is_driver_worker
        self.use_spec = use_spec
        self.proposer = InnerWorker(is_driver_worker)
        self.scorer = InnerWorker(is_driver_worker)

    def execute_model(self, request=None):
        if self.is_driver_worker:
            k = request.k
            skip = request.skip
            broadcast_tensor_dict({"k": k, "skip": skip}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            k = data["k"]
            skip = data["skip"]
        if BRANCH:
            return self.scorer.execute_model(request)
        for _ in range(max(k, 1)):
            self.proposer.execute_model(request)
        return self.scorer.execute_model(request)
"""
)

CONTROL = ("broadcast_tensor_dict", "")
PROPOSER = ("step", "proposer")
SCORER = ("step", "scorer")


def schedule_of(source: str, name: str = "SpecWorker") -> tuple[Schedule, Schedules]:
    project = project_of({"acme/spec.py": source})
    found = schedules(project)
    schedule = found.schedule(class_named(project, name))
    assert schedule is not None
    return schedule, found


def runs(path: SchedulePath) -> list[tuple[str, str]]:
    return [(run.op.kind, run.op.part) for run in path.runs]


def shapes(schedule: Schedule, role: Role) -> list[list[tuple[str, str]]]:
    return sorted(runs(p) for p in schedule.paths[role])


def disagreements(source: str, name: str = "SpecWorker") -> list[Disagreement]:
    schedule, found = schedule_of(source, name)
    return found.disagreements(schedule)


# ------------------------------------------------------------------ roles


def test_the_driver_flag_gives_each_role_its_own_side() -> None:
    schedule, _ = schedule_of(INNER, "InnerWorker")
    (driver,) = schedule.paths["driver"]
    (other,) = schedule.paths["non-driver"]
    assert [(r.op.sends, r.op.site.line, r.op.carries) for r in driver.runs] == [
        (True, 10, ("tokens",))
    ]
    assert [(r.op.sends, r.op.site.line) for r in other.runs] == [(False, 12)]
    assert driver.runs[0].op.key == other.runs[0].op.key  # one collective, both sides
    assert schedule.partial == {"driver": False, "non-driver": False}


def test_a_rank_compared_with_the_driver_s_splits_the_roles_like_the_flag() -> None:
    source = INNER.replace("if self.is_driver_worker:", "if self.rank != 0:").replace(
        "self.is_driver_worker = is_driver_worker", "self.rank = rank"
    )
    schedule, _ = schedule_of(source, "InnerWorker")
    (driver,) = schedule.paths["driver"]
    (other,) = schedule.paths["non-driver"]
    # ``!=``: the body is the other ranks', the else the driver's
    assert [r.op.sends for r in driver.runs] == [False]
    assert [r.op.site.line for r in driver.runs] == [12]
    assert [r.op.site.line for r in other.runs] == [10]


def test_a_method_asserting_its_role_runs_on_that_role_only() -> None:
    source = (
        INNER
        + """
class Split:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if not self.is_driver_worker:
            return self._other()
        broadcast_tensor_dict({"a": 1}, src=0)

    def _other(self):
        assert not self.is_driver_worker
        broadcast_tensor_dict(src=0)
        broadcast_tensor_dict(src=0)
"""
    )
    schedule, found = schedule_of(source, "Split")
    assert [len(p.runs) for p in schedule.paths["driver"]] == [1]
    assert [len(p.runs) for p in schedule.paths["non-driver"]] == [2]
    # one send against two receives: each role's path has no match, the driver's
    # parting at its send, the other ranks' at their first receive
    found_disagreements = found.disagreements(schedule)
    assert sorted((d.role, d.site.line) for d in found_disagreements) == [
        ("driver", 22),
        ("non-driver", 26),
    ]


# ------------------------------------------------------------ what decides


def test_a_branch_on_a_received_value_is_taken_alike_by_every_rank() -> None:
    schedule, _ = schedule_of(WRAPPER.replace("BRANCH", "skip"))
    expected = [[CONTROL, PROPOSER, SCORER], [CONTROL, SCORER]]
    assert shapes(schedule, "driver") == expected
    assert shapes(schedule, "non-driver") == expected
    for role in ROLES:
        decided = {
            (d.value, d.holds)
            for p in schedule.paths[role]
            for d in p.decisions
            if d.text.endswith("skip")
        }
        # the driver's own ``skip`` is the value it sent under "skip"
        assert decided == {("shared::skip", True), ("shared::skip", False)}
    assert disagreements(WRAPPER.replace("BRANCH", "skip")) == []


def test_the_driver_testing_what_it_sent_by_the_expression_it_came_from_is_shared() -> None:
    """The driver sent ``skip = request.skip`` under "skip" and then tests
    ``request.skip``: the same value, so still the one every rank received (the other
    ranks test the dict they received under the same name)."""
    source = WRAPPER.replace("BRANCH", "request.skip").replace(
        '            skip = data["skip"]\n', "            request = data\n"
    )
    schedule, found = schedule_of(source)
    driver = {d.value for p in schedule.paths["driver"] for d in p.decisions if d.text}
    assert "shared::skip" in driver
    assert found.disagreements(schedule) == []


def test_the_engine_s_state_is_shared() -> None:
    schedule, _ = schedule_of(WRAPPER.replace("BRANCH", "not self.use_spec"))
    values = {d.value for p in schedule.paths["driver"] for d in p.decisions if d.text}
    assert any(v.startswith("self:") and v.endswith("use_spec") for v in values)
    assert all(d.shared for p in schedule.paths["non-driver"] for d in p.decisions)
    assert disagreements(WRAPPER.replace("BRANCH", "not self.use_spec")) == []


def test_a_value_only_the_driver_has_is_local_and_the_roles_disagree() -> None:
    """The driver tests the request (the other ranks get None): nothing tells the other
    ranks which side it took; the path it skips the proposer on has no match."""
    source = WRAPPER.replace("BRANCH", "self.is_driver_worker and request.no_spec")
    schedule, found = schedule_of(source)
    local = [
        d for p in schedule.paths["driver"] for d in p.decisions if d.text == "request.no_spec"
    ]
    assert local and all(not d.shared and d.value.startswith("local:driver:") for d in local)
    found_disagreements = found.disagreements(schedule)
    assert found_disagreements
    roles = {(d.role, tuple(runs(d.path))) for d in found_disagreements}
    assert ("driver", (CONTROL, SCORER)) in roles


def test_a_received_value_the_other_ranks_ignore_is_a_disagreement() -> None:
    """The driver branches on what it sent, the other ranks never test it."""
    source = WRAPPER.replace("BRANCH", "self.is_driver_worker and skip").replace(
        '            skip = data["skip"]\n', ""
    )
    schedule, found = schedule_of(source)
    (only,) = found.disagreements(schedule)
    assert (only.role, runs(only.path)) == ("driver", [CONTROL, SCORER])
    assert [d.describe() for d in only.selecting if d.text == "skip"] == ["skip"]
    assert all(d.shared for d in only.selecting)


# ---------------------------------------------------------------- counts


def test_loop_counts_are_kept_as_written_with_the_value_they_read() -> None:
    schedule, _ = schedule_of(WRAPPER.replace("BRANCH", "skip"))
    for role in ROLES:
        (long,) = [p for p in schedule.paths[role] if len(p.runs) == 3]
        proposer = long.runs[1]
        assert [c.text for c in proposer.times] == ["max(k, 1)"]
        assert long.count_values() == ("shared::k",)
        assert proposer.times[0].value({"shared::k": 0}) == 1
        assert proposer.times[0].value({"shared::k": 4}) == 4
        assert proposer.times[0].value({}) is None
        assert long.runs[2].times == ()  # the scorer runs once


def test_loop_counts_that_no_shared_value_makes_equal_disagree() -> None:
    """The driver runs the proposer ``k`` times, the other ranks ``max(k, 0) + 1``:
    whatever ``k`` every rank received, they part (with ``k + 1`` they would agree
    when ``k`` is -1: neither runs the proposer)."""
    source = WRAPPER.replace("BRANCH", "skip").replace(
        "        for _ in range(max(k, 1)):\n            self.proposer.execute_model(request)\n",
        "        if self.is_driver_worker:\n"
        "            for _ in range(k):\n"
        "                self.proposer.execute_model(request)\n"
        "        else:\n"
        "            for _ in range(max(k, 0) + 1):\n"
        "                self.proposer.execute_model(request)\n",
    )
    schedule, found = schedule_of(source)
    counts = {
        role: {c.text for p in schedule.paths[role] for r in p.runs for c in r.times}
        for role in ROLES
    }
    assert counts == {"driver": {"k"}, "non-driver": {"max(k, 0) + 1"}}
    found_disagreements = found.disagreements(schedule)
    assert {(d.role, len(d.path.runs)) for d in found_disagreements} == {
        ("driver", 3),
        ("non-driver", 3),
    }


def test_counts_are_compared_as_range_runs_them() -> None:
    """``k`` and ``k + 1`` times agree when ``k`` is -1: ``range`` of a negative count
    runs nothing, so neither role runs the proposer."""
    source = WRAPPER.replace("BRANCH", "skip").replace(
        "        for _ in range(max(k, 1)):\n            self.proposer.execute_model(request)\n",
        "        if self.is_driver_worker:\n"
        "            for _ in range(k):\n"
        "                self.proposer.execute_model(request)\n"
        "        else:\n"
        "            for _ in range(k + 1):\n"
        "                self.proposer.execute_model(request)\n",
    )
    assert disagreements(source) == []


@pytest.mark.parametrize(
    ("text", "names", "values", "value"),
    [
        ("3", (), {}, 3),
        ("k + 1", (("k", "shared::k"),), {"shared::k": 2}, 3),
        ("k * n - 1", (("k", "a"), ("n", "b")), {"a": 2, "b": 3}, 5),
        ("min(k, 2)", (("k", "a"),), {"a": 7}, 2),
        ("k // 2", (("k", "=9"),), {}, 4),
        ("len(seqs)", (("len(seqs)", "a"),), {"a": 6}, 6),
        ("k", (("k", "a"),), {"a": True}, None),  # not an int
        ("k / 2", (("k", "a"),), {"a": 4}, None),  # not a count
        ("k", (), {"k": 1}, None),  # a name the path does not bind
    ],
)
def test_count_value(
    text: str, names: tuple[tuple[str, str], ...], values: dict[str, object], value: int | None
) -> None:
    assert Count(text, names).value(values) == value


def test_decisions_are_consistent_when_some_value_satisfies_them_all() -> None:
    def d(op: str, literal: str, holds: bool) -> Decision:
        return Decision("shared::k", op, literal, holds)

    assert consistent([d("==", "0", True), d(">", "1", False)])
    assert not consistent([d("==", "0", True), d(">", "1", True)])
    assert not consistent([d("truthy", "", True), d("truthy", "", False)])
    assert consistent([d("truthy", "", True), Decision("shared::n", "truthy", "", False)])
    assert not consistent([d("is", "None", True), d("truthy", "", True)])
    assert consistent([d("in", "1|2", True), d("==", "2", True)])
    assert not consistent([d("in", "1|2", True), d("==", "3", True)])


STOP = (
    INNER
    + """
class StopWorker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker
        self.inner = InnerWorker(is_driver_worker)

    def execute_model(self, request=None):
        if self.is_driver_worker:
            if request is None:
                broadcast_tensor_dict({}, src=0)
                return []
            broadcast_tensor_dict({"n": request.n}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            if not data:
                return []
        return self.inner.execute_model(request)
"""
)


def test_the_driver_s_empty_dict_stops_the_ranks_that_test_the_dict_received() -> None:
    schedule, found = schedule_of(STOP, "StopWorker")
    stop = [p for p in schedule.paths["driver"] if len(p.runs) == 1]
    assert [[(r.op.empty, r.op.sends) for r in p.runs] for p in stop] == [[(True, True)]]
    waits = [p for p in schedule.paths["non-driver"] if len(p.runs) == 1]
    # the dict itself received (key ""), false: the stop signal, known to every rank
    assert [[(d.value, d.holds, d.describe()) for d in p.decisions] for p in waits] == [
        [("shared::", False, "not data")]
    ]
    assert found.disagreements(schedule) == []


def test_ranks_that_never_test_the_dict_received_miss_the_stop() -> None:
    source = STOP.replace("            if not data:\n                return []\n", "")
    schedule, found = schedule_of(source, "StopWorker")
    assert [len(p.runs) for p in schedule.paths["non-driver"]] == [2]
    (only,) = found.disagreements(schedule)
    assert (only.role, len(only.path.runs)) == ("driver", 1)
