"""Broadcasts per engine step through wrapper workers (``Project.wrapper_step``) and RC110:
on a fixture of our own, on the engine's speculative-decoding mode (the static count
equals the engine's own counter at tp 2) before and after ``fold-control-broadcast``,
and on vLLM 0.5.1, 0.6.0 and 0.8.0's ``spec_decode``."""

from __future__ import annotations

from pathlib import Path

import pytest

from runnercheck.analysis.extract import extract_file
from runnercheck.analysis.project import Project
from runnercheck.analysis.wrappers import evaluate, representative
from runnercheck.check import check_paths
from runnercheck.demo.engine import run_engine
from tests.check import built
from tests.check.conftest import FIXTURES, REPO, good_tree
from tests.spec_decode_fixture import copy_before
from tests.vllm_wheels import vllm_source

ENGINE = REPO / "runnercheck" / "demo" / "engine"
WRAPPER = FIXTURES / "wrapper-control-broadcast"
K = 3


def project_of(*directories: Path) -> Project:
    return Project(extract_file(p) for d in directories for p in sorted(d.rglob("*.py")))


def line_of(path: Path, text: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_inner_workers_resolve_through_a_factory_and_a_helper(tmp_path: Path) -> None:
    project = project_of(built.tree(WRAPPER / "bad", tmp_path / "bad"))
    wrapper = project.resolve_class("LookaheadWorker", "x")
    assert wrapper is not None
    # annotated WorkerBase (abstract): the classes come from `build`'s `cls(draft, target)`
    inner = {attr: [c.name for c in held] for attr, held in project.inner_workers(wrapper).items()}
    assert inner == {"draft": ["DraftWorker"], "target": ["Worker"]}
    step = project.wrapper_step(wrapper)
    assert step is not None
    described = {p.describe() for p in step.paths["driver"]}
    assert (
        "1 (LookaheadWorker) + max(lookahead, 1)·1 (draft: DraftWorker) + 1 (target: Worker)"
        in (described)
    )
    # `propose(request, lookahead)` -> `_more(request, count - 1)` -> `range(steps)`
    assert (
        "1 (LookaheadWorker) + 1 (draft: DraftWorker) + (lookahead - 1)·1 (draft: DraftWorker)"
        " + 1 (verifier._target: Worker)"
    ) in described
    assert step.counts("driver", {"lookahead": 4}) == {6, 3}
    good = project_of(good_tree(WRAPPER, tmp_path / "good"))
    plain = good.resolve_class("LookaheadWorker", "x")
    assert plain is not None
    found = good.wrapper_step(plain)
    assert found is not None and not found.control_paths()


def test_loop_counts_evaluate() -> None:
    assert evaluate("max(k, 1)", {"k": 0}) == 1
    assert evaluate("(k - 1) * 2", {"k": 4}) == 6
    with pytest.raises(ValueError, match="no value for 'n'"):
        evaluate("n", {})
    with pytest.raises(ValueError, match="not a count"):
        evaluate("len(x)", {"x": 1})


def before_fold(tmp_path: Path) -> Path:
    return copy_before(tmp_path / "spec_decode")


@pytest.mark.slow
def test_speculative_engine_static_count_equals_its_counter() -> None:
    """Static: the paths of SpecDecodeWorker's step with the lookahead count at K;
    run time: the engine's own broadcast counter, at tp 2 (a broadcast at tp 1 sends
    nothing), plus the driver's final empty broadcast that stops the other rank."""
    project = project_of(ENGINE / "spec_decode", ENGINE / "merged")
    worker = project.resolve_class("SpecDecodeWorker", str(ENGINE / "spec_decode" / "x.py"))
    assert worker is not None
    step = project.wrapper_step(worker)
    assert step is not None
    assert step.control_paths() == []
    # the driver's decode step (K proposer steps in `sampler_output`, the scorer) and the
    # other ranks': the first proposer step carries the control values, the loop runs
    # once less; the stop signal is the wrapper's only own broadcast
    assert {p.describe() for p in step.paths["driver"]} >= {
        "num_lookahead_slots·1 (proposer_worker: MultiStepWorker)"
        " + 1 (scorer._scorer_worker: Worker)",
        "1 (proposer_worker: MultiStepWorker) + (max(num_lookahead_slots, 1) - 1)·1"
        " (proposer_worker: MultiStepWorker) + 1 (scorer_worker: Worker)",
        "1 (SpecDecodeWorker)",
    }
    static = step.counts("driver", {"num_lookahead_slots": K})
    result = run_engine("merged", tp=2, steps=3, timeout_s=60, num_speculative_tokens=K)
    counted = result["broadcasts_per_step_list"]
    # prefill 2 (one proposer step, scorer) and decode K + 1; stop: 1
    assert set(counted) == {2, K + 1}
    assert static == {*counted, 1}


def test_check_reports_the_control_broadcast_before_the_fold(tmp_path: Path) -> None:
    copy = before_fold(tmp_path)
    source = copy / "spec_decode_worker.py"
    result = check_paths([copy, ENGINE / "merged"])
    assert [(f.code, Path(f.path).name, f.line) for f in result.findings] == [
        ("RC110", "spec_decode_worker.py", line_of(source, "broadcast_tensor_dict(broadcast_dict"))
    ]
    project = project_of(copy, ENGINE / "merged")
    worker = project.resolve_class("SpecDecodeWorker", str(source))
    assert worker is not None
    step = project.wrapper_step(worker)
    assert step is not None
    chosen = representative(step.control_paths())
    assert chosen is not None and chosen.describe() == (
        "1 (SpecDecodeWorker) + max(num_lookahead_slots, 1)·1 (proposer_worker: MultiStepWorker)"
        " + 1 (scorer_worker: Worker)"
    )
    assert chosen.describe() in result.findings[0].message
    # prefill 3, decode K + 2, stop 1
    assert step.counts("driver", {"num_lookahead_slots": K}) == {3, K + 2, 1}


@pytest.mark.vllm
@pytest.mark.parametrize("version", ["0.5.1", "0.6.0", "0.8.0"])
def test_vllm_spec_decode_control_broadcast(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        root = vllm_source(version)
    except RuntimeError as exc:
        pytest.skip(f"vllm=={version} not available: {exc}")
    monkeypatch.chdir(root)
    source = Path("vllm/spec_decode/spec_decode_worker.py")
    result = check_paths(["vllm/spec_decode"], select=["RC110"])
    line = line_of(source, "broadcast_tensor_dict(broadcast_dict")
    # the fold refuses vLLM's wrapper (its scorer runs first on some paths): no error
    # for a broadcast `migrate` cannot remove, a note that says why
    assert result.findings == []
    assert [(f.code, f.path, f.line) for f in result.notes] == [("RC110", source.as_posix(), line)]
    message = result.notes[0].message
    assert message.startswith(
        f"SpecDecodeWorker broadcasts its own control dict (spec_decode_worker.py:{line})"
    )
    # 0.7+ holds the scorer as the plain WorkerBase and the proposer as a delegate of a
    # worker class chosen at run time: counted through the classes they stand for
    scorer = "MultiStepWorker" if version >= "0.7" else "Worker"
    assert (
        "1 (SpecDecodeWorker) + max(num_lookahead_slots, 1)·1 (proposer_worker: MultiStepWorker)"
        f" + 1 (scorer_worker: {scorer}) broadcasts per step"
    ) in message
    assert "no automatic fix applies" in message
    assert (
        "(note: `runnercheck migrate --select fold-control-broadcast` refuses it, MIG204: the "
        "first inner step after SpecDecodeWorker's control values differs between paths: "
    ) in message
    # receiving, then dispatching would fix it, but vLLM's inner steps take no dict
    # received ahead of them (0.8), or the proposer's is held by a helper (0.5, 0.6)
    assert message.endswith(
        "the other ranks could not hand it the broadcast they read the values from)"
    )


DELEGATES = """
from vllm.distributed import broadcast_tensor_dict


class WorkerBase:
    def execute_model(self, execute_model_req=None):
        raise NotImplementedError


class LocalOrDistributedWorkerBase(WorkerBase):
    def execute_model(self, execute_model_req=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": execute_model_req}, src=0)
        else:
            broadcast_tensor_dict(src=0)
        return []


class DelegateWorkerBase(WorkerBase):
    worker: WorkerBase

    def execute_model(self, execute_model_req=None):
        return self.worker.execute_model(execute_model_req)


class DraftWorker(DelegateWorkerBase):
    pass


class SpecWorker(WorkerBase):
    def __init__(self, proposer_worker: DraftWorker, scorer_worker: WorkerBase):
        self.proposer_worker = proposer_worker
        self.scorer_worker = scorer_worker
        self.steps = 2

    def execute_model(self, execute_model_req=None):
        if self.rank == 0:
            broadcast_tensor_dict({"k": 1}, src=0)
        else:
            broadcast_tensor_dict(src=0)
        for _ in range(self.steps):
            self.proposer_worker.execute_model(execute_model_req)
        return self.scorer_worker.execute_model(execute_model_req)
"""


def test_a_delegate_and_a_plain_worker_base_count_through_what_they_stand_for(
    tmp_path: Path,
) -> None:
    """vLLM 0.7+'s shape: the scorer held as the plain ``WorkerBase`` (not an ABC), the
    proposer a delegate of a worker chosen at run time, a loop count on ``self``."""
    (tmp_path / "spec.py").write_text(DELEGATES)
    project = project_of(tmp_path)
    wrapper = project.resolve_class("SpecWorker", str(tmp_path / "spec.py"))
    assert wrapper is not None
    inner = {attr: [c.name for c in held] for attr, held in project.inner_workers(wrapper).items()}
    assert inner == {
        "proposer_worker": ["DraftWorker"],
        "scorer_worker": ["LocalOrDistributedWorkerBase"],
    }
    step = project.wrapper_step(wrapper)
    assert step is not None
    assert representative(step.control_paths()) == step.most("driver")
    assert step.most("driver").describe() == (
        "1 (SpecWorker) + self.steps·1 (proposer_worker: DraftWorker)"
        " + 1 (scorer_worker: LocalOrDistributedWorkerBase)"
    )
    assert step.counts("non-driver", {"self.steps": 2}) == {4}
    result = check_paths([tmp_path])
    # no extras channel on the inner workers: the fold cannot apply, a note
    assert result.findings == []
    assert [f.code for f in result.notes] == ["RC110"]
    assert "MIG204: proposer_worker's step (DraftWorker) sends no extras" in result.notes[0].message


def test_dotted_loop_counts_evaluate() -> None:
    assert evaluate("self.n + 1", {"self.n": 2}) == 3
    with pytest.raises(ValueError, match="not a count"):
        evaluate("self.n[0]", {"self.n": 2})
