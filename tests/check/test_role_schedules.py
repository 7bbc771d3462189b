"""The collective schedule (what each rank runs, in order) and RC112 role-schedules-differ:
a path on which the driver and the other ranks run different collectives under the same
shared values is an error; branches on values every rank received are taken alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from runnercheck.analysis.schedule import Schedule, SchedulePath, schedules
from runnercheck.check import check_paths, check_sources
from runnercheck.findings import Finding
from tests.check.conftest import REPO
from tests.spec_decode_fixture import copy_before
from tests.vllm_wheels import vllm_source

INNER = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": request.tokens}, src=0)
            return self.run(request.tokens)
        data = broadcast_tensor_dict(src=0)
        return self.run(data["tokens"])
"""

#: The hang: the driver skips the proposer when speculation is disabled for the batch
#: (a value only the driver has), the other ranks always run it ``max(k, 1)`` times.
HANG = (
    INNER
    + """

class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer_worker = proposer
        self.scorer_worker = scorer
        self.rank = rank

    def execute_model(self, request=None):
        if self.rank != self._driver_rank:
            self._run_non_driver_rank()
            return []
        num_lookahead_slots = request.num_lookahead_slots
        broadcast_tensor_dict({"num_lookahead_slots": num_lookahead_slots}, src=0)
        if request.speculation_disabled:
            return self.scorer_worker.execute_model(request)
        for _ in range(num_lookahead_slots):
            self.proposer_worker.execute_model(request)
        return self.scorer_worker.execute_model(request)

    @property
    def _driver_rank(self):
        return 0

    def _run_non_driver_rank(self):
        assert self.rank != self._driver_rank
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False
        num_lookahead_slots = data["num_lookahead_slots"]
        for _ in range(max(num_lookahead_slots, 1)):
            self.proposer_worker.execute_model()
        self.scorer_worker.execute_model()
        return True
"""
)

#: vLLM 0.5.0/0.5.1: the flag is sent, but the other ranks never branch on it.
SENT_BUT_IGNORED = HANG.replace(
    'broadcast_tensor_dict({"num_lookahead_slots": num_lookahead_slots}, src=0)\n'
    "        if request.speculation_disabled:",
    "disable = request.speculation_disabled\n"
    '        broadcast_tensor_dict({"num_lookahead_slots": num_lookahead_slots, '
    '"disable": disable}, src=0)\n'
    "        if disable:",
)

#: The issue's smallest shape: control values received by broadcast decide whether the
#: scorer or the proposer runs first (and whether the proposer runs at all).
ORDER_BY_RECEIVED = (
    INNER
    + """

class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer = proposer
        self.scorer = scorer
        self.rank = rank

    def execute_model(self, request=None):
        if self.rank == 0:
            no_spec = request.no_spec; broadcast_tensor_dict({"no_spec": no_spec}, src=0)
        else:
            no_spec = broadcast_tensor_dict(src=0)["no_spec"]
        if no_spec:
            return self.scorer.execute_model(request)
        self.proposer.execute_model(request)
        return self.scorer.execute_model(request)
"""
)

#: A clean legacy worker and runner: two broadcasts per step, both roles alike.
LEGACY = """\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def __init__(self, is_driver_worker=False):
        self.is_driver_worker = is_driver_worker

    def prepare_input_tensors(self, seq_group_metadata_list):
        if self.is_driver_worker:
            tokens = self._prepare(seq_group_metadata_list)
            broadcast_tensor_dict({"input_tokens": tokens}, src=0)
        else:
            tokens = broadcast_tensor_dict(src=0)["input_tokens"]
        return tokens

    def execute_model(self, seq_group_metadata_list, kv_caches):
        tokens = self.prepare_input_tensors(seq_group_metadata_list)
        return self.model(tokens, kv_caches)


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker
        self.model_runner = ModelRunner(is_driver_worker)

    def execute_model(self, seq_group_metadata_list=None):
        if self.is_driver_worker:
            if seq_group_metadata_list is None:
                broadcast_tensor_dict({}, src=0)
                return []
            num_seq_groups = len(seq_group_metadata_list)
            broadcast_tensor_dict({"num_seq_groups": num_seq_groups}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            if not data:
                return []
            num_seq_groups = data["num_seq_groups"]
        if num_seq_groups == 0:
            return []
        return self.model_runner.execute_model(seq_group_metadata_list, None)
"""


def rc112(sources: dict[str, str]) -> list[Finding]:
    """RC112's errors and notes on in-memory sources (a usage error before the rule)."""
    result = check_sources(sources, select=["RC112"])
    return [*result.findings, *result.notes]


def schedule_of(source: str, name: str) -> Schedule:
    project = Project([extract_source(source, "example.py")])
    cls = next(c for c in project.all_classes() if c.name == name)
    runners = [r for rs in project.runner_candidates(cls).values() for r in rs]
    found = schedules(project).schedule(cls, runners[0] if runners else None)
    assert found is not None
    return found


def kinds(path: SchedulePath) -> list[tuple[str, str, tuple[str, ...]]]:
    """Each run: what it is, the part of the engine that runs it, its loop counts."""
    return [(run.op.kind, run.op.part, tuple(c.text for c in run.times)) for run in path.runs]


# ------------------------------------------------------------------ the rule


def test_the_hang_shape_is_an_error() -> None:
    """The driver skips the proposer on a value only it has; the other ranks run it
    ``max(k, 1)`` times: one error, at the scorer the driver runs instead."""
    found = rc112({"example.py": HANG})
    assert [(f.code, f.line, f.severity) for f in found] == [("RC112", 29, "error")]
    message = found[0].message
    assert message.startswith("SpecWorker.execute_model: when `request.speculation_disabled`")
    assert "(driver only)" in message
    assert "`max(num_lookahead_slots, 1)` x proposer_worker's step" in message
    assert "a rank waits for a broadcast that is never sent" in message


def test_a_value_sent_but_not_branched_on_is_an_error() -> None:
    """vLLM 0.5.x's shape: the driver sends the flag, the other ranks ignore it."""
    found = rc112({"example.py": SENT_BUT_IGNORED})
    assert [(f.code, f.severity) for f in found] == [("RC112", "error")]
    assert "`disable` (received by every rank)" in found[0].message


def test_received_control_values_deciding_the_order_are_no_error() -> None:
    """The issue's smallest shape: every rank branches on the same received value."""
    assert rc112({"example.py": ORDER_BY_RECEIVED}) == []


def test_a_clean_legacy_worker_and_runner_are_no_error() -> None:
    assert rc112({"example.py": LEGACY}) == []


@pytest.mark.parametrize(
    "target",
    [
        "runnercheck/demo/engine",
        "tests/migrate/fixtures/engine/before",
        "tests/migrate/fixtures/engine/after",
    ],
)
def test_the_project_engines_agree(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = check_paths([target], select=["RC112"])
    assert [*result.findings, *result.notes] == []


def test_the_wrapper_before_the_fold_agrees(tmp_path: Path) -> None:
    """The speculative-decoding package with its own control broadcast (the wrapper
    ``fold-control-broadcast`` starts from; the engine it imports is read for context)."""
    result = check_paths([str(copy_before(tmp_path / "spec_decode"))], select=["RC112"])
    assert [*result.findings, *result.notes] == []


# -------------------------------------------------------------- the schedule


def test_each_role_s_collectives_in_order_with_symbolic_loop_counts() -> None:
    schedule = schedule_of(HANG, "SpecWorker")
    own = ("broadcast_tensor_dict", "", ())
    scorer = ("step", "scorer_worker", ())
    assert [kinds(p) for p in schedule.paths["driver"]] == [
        [own, ("step", "proposer_worker", ("num_lookahead_slots",)), scorer],
        [own, scorer],
    ]
    assert [kinds(p) for p in schedule.paths["non-driver"]] == [
        [own, ("step", "proposer_worker", ("max(num_lookahead_slots, 1)",)), scorer],
        [own],  # the driver's empty dict: the stop signal
    ]
    # the loop counts name what every rank received, on both roles
    counts = {
        value
        for path in (*schedule.paths["driver"], *schedule.paths["non-driver"])
        for run in path.runs
        for count in run.times
        for value in count.values
    }
    assert counts == {"shared::num_lookahead_slots"}


def test_a_branch_on_a_received_value_is_shared_and_one_on_the_request_is_local() -> None:
    schedule = schedule_of(ORDER_BY_RECEIVED, "SpecWorker")
    for role in ("driver", "non-driver"):
        decided = {
            (d.value, d.holds)
            for path in schedule.paths[role]  # type: ignore[index]
            for d in path.decisions
            if d.value.endswith("no_spec")
        }
        assert decided == {("shared::no_spec", True), ("shared::no_spec", False)}
    hang = schedule_of(HANG, "SpecWorker")
    local = [
        d
        for path in hang.paths["driver"]
        for d in path.decisions
        if d.text == "request.speculation_disabled"
    ]
    assert local and all(not d.shared and d.value.startswith("local:driver:") for d in local)


def test_the_rank_compared_with_the_driver_s_splits_the_roles() -> None:
    """``self.rank != self._driver_rank``: the other ranks run only the receiving
    side, the driver only the sending side."""
    schedule = schedule_of(HANG, "SpecWorker")
    assert all(
        run.op.sends or run.op.kind == "step" for p in schedule.paths["driver"] for run in p.runs
    )
    assert not any(run.op.sends for p in schedule.paths["non-driver"] for run in p.runs)


def test_a_legacy_step_is_the_worker_s_broadcast_then_the_runner_s_on_both_roles() -> None:
    schedule = schedule_of(LEGACY, "Worker")
    full = [("broadcast_tensor_dict", "", ()), ("broadcast_tensor_dict", "model_runner", ())]
    for role in ("driver", "non-driver"):
        assert full in [kinds(p) for p in schedule.paths[role]]  # type: ignore[index]
    assert schedules(Project([extract_source(LEGACY, "example.py")])).disagreements(schedule) == []


# ------------------------------------------------------------ real releases


def _release(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        monkeypatch.chdir(vllm_source(version))
    except RuntimeError as exc:  # no package index: say so instead of failing obscurely
        pytest.skip(f"vllm=={version} not available: {exc}")


@pytest.mark.vllm
@pytest.mark.parametrize("version", ["0.5.0", "0.5.1"])
def test_vllm_0_5_s_speculative_worker_skips_its_proposer_on_the_driver_alone(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_run_no_spec(skip_proposer=disable_all_speculation)`` on the driver, the
    proposer ``max(k, 1)`` times on the other ranks whatever the flag: the hang vLLM
    0.6.0 fixed by sending the flag and branching on it on every rank."""
    _release(version, monkeypatch)
    found = check_paths(["vllm"], select=["RC112"]).findings
    assert [f.path for f in found] == ["vllm/spec_decode/spec_decode_worker.py"]
    assert "`disable_all_speculation` (received by every rank)" in found[0].message


@pytest.mark.vllm
def test_vllm_0_6_0_s_speculative_worker_has_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix: only a note is left, on the proposer's zero-proposal path, which a
    value of the proposer's own helper selects (and vLLM refuses with a RuntimeError
    where the draft runs on several ranks)."""
    _release("0.6.0", monkeypatch)
    result = check_paths(["vllm"], select=["RC112"])
    assert result.findings == []
    assert [f.path for f in result.notes] == ["vllm/spec_decode/batch_expansion.py"]


def test_a_loop_count_read_from_a_received_key_is_counted() -> None:
    """``range(max(data["k"], 1))``: the count names the key received (no internal
    error in the wrapper's broadcast count, RC110's, either)."""
    source = HANG.replace(
        'num_lookahead_slots = data["num_lookahead_slots"]\n'
        "        for _ in range(max(num_lookahead_slots, 1)):",
        'for _ in range(max(data["num_lookahead_slots"], 1)):',
    )
    assert 'range(max(data["num_lookahead_slots"], 1))' in source
    result = check_sources({"example.py": source})
    assert [f.code for f in result.findings] == ["RC112"]
    assert "`max(data['num_lookahead_slots'], 1)` x proposer_worker's step" in (
        result.findings[0].message
    )


def test_a_v1_worker_is_no_error() -> None:
    """The issue's V1 shape: the runner prepares its own input, nothing broadcasts."""
    source = """\
class Runner:
    def prepare_model_input(self, x): return x
    def execute_model(self, x): return self.prepare_model_input(x)
class Worker:
    def __init__(self): self.model_runner = Runner()
    def execute_model(self, x): return self.model_runner.execute_model(x)
"""
    assert rc112({"example.py": source}) == []
