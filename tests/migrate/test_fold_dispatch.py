"""``fold-control-broadcast`` where the control values select the first inner step
(vLLM 0.6.x-0.9.x's speculative wrapper: the scorer first without speculation, the
proposer first with it): the other ranks receive the first inner step's broadcast,
whichever step it is, read the values from it and hand the dict to the step they select
(its ``received`` argument); the driver sends the values with that step's dict. Inline
sources, the shapes refused, the verification by the collective schedules, and the
engine's wrapper of that shape run at tp 2 before and after."""

from __future__ import annotations

import shutil
from pathlib import Path

import libcst as cst
import pytest

from codemods import fold_control_broadcast as fold
from codemods.framework.pipeline import migrate
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.fold import verify_fold
from runnercheck.analysis.project import Project
from runnercheck.check import check_paths, check_sources
from runnercheck.demo.engine import run_engine
from runnercheck.records import Refused
from tests.spec_decode_fixture import SPEC_DECODE, V06_WORKER, copy_before

#: Inner workers whose step takes the dict received ahead of it.
WORKERS = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    received_extras: dict

    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, execute_model_req=None, received=None):
        if self.is_driver_worker:
            if execute_model_req is None:
                broadcast_tensor_dict({}, src=0)
                return None
            data = {
                "tokens": execute_model_req.tokens,
                "broadcast_extras": execute_model_req.broadcast_extras,
            }
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0) if received is None else received
            if not data:
                return None
            self.received_extras = data.pop("broadcast_extras")
        return [data["tokens"]]


class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer = proposer
        self.scorer = scorer
        self.rank = rank

    def execute_model(self, execute_model_req=None):
        if self.rank != 0:
            self._run_non_driver()
            return []
        if execute_model_req is None:
            broadcast_tensor_dict({}, src=0)
            return []
        k = execute_model_req.lookahead
        no_spec = k == 0
"""
DRIVER = """\
        broadcast_tensor_dict({"k": k, "no_spec": no_spec}, src=0)
        if no_spec:
            out = self.scorer.execute_model(execute_model_req)
            self.proposer.execute_model(execute_model_req)
            return out
        for _ in range(k):
            self.proposer.execute_model(execute_model_req)
        return self.scorer.execute_model(execute_model_req)

    def _run_non_driver(self):
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False
        if data["no_spec"]:
            self.scorer.execute_model()
        for _ in range(max(data["k"], 1)):
            self.proposer.execute_model()
        if not data["no_spec"]:
            self.scorer.execute_model()
        return True
"""
FOLDED = """\
        # The control values travel with the first inner step's broadcast.
        execute_model_req.broadcast_extras = {"k": k, "no_spec": no_spec}
        if no_spec:
            out = self.scorer.execute_model(execute_model_req)
            self.proposer.execute_model(execute_model_req)
            return out
        for _ in range(k):
            self.proposer.execute_model(execute_model_req)
        return self.scorer.execute_model(execute_model_req)

    def _run_non_driver(self):
        # The control values come with the first inner step's broadcast, whichever
        # step they select: that step is handed the dict received here.
        received = broadcast_tensor_dict(src=0)
        if not received:
            return False
        data = received["broadcast_extras"]
        if data["no_spec"]:
            self.scorer.execute_model(received=received)
            received = None
        for _ in range(max(data["k"], 1)):
            self.proposer.execute_model(received=received)
            received = None
        if not data["no_spec"]:
            self.scorer.execute_model()
        return True
"""
PATH = "/src/spec.py"


def rewrite(source: str) -> tuple[str, list[str], list[Refused]]:
    project = Project([extract_source(source, PATH)])
    module, changed, skipped = fold.rewrite_module(cst.parse_module(source), project, PATH)
    return module.code, changed, skipped


def test_receive_then_dispatch() -> None:
    before = WORKERS + DRIVER
    after, changed, skipped = rewrite(before)
    assert (changed, skipped) == (["SpecWorker"], [])
    assert after == WORKERS + FOLDED
    # RC110 an error before (the fold removes it), nothing after; a second run changes
    # nothing
    found = check_sources({PATH: before}).findings
    assert [(f.code, f.severity) for f in found] == [("RC110", "error")]
    assert "in the dict of the first inner step, whichever they select" in found[0].message
    assert check_sources({PATH: after}).findings == []
    assert rewrite(after) == (after, [], [])


def test_the_schedules_verify_the_fold() -> None:
    """The same semantics before and after: one broadcast less on every path that had
    the control broadcast, the roles paired on every path; a dispatch that hands the
    dict to a step that never runs first is caught."""
    before = Project([extract_source(WORKERS + DRIVER, PATH)])
    lines = (WORKERS + DRIVER).splitlines()
    sites = frozenset(
        number
        for number, text in enumerate(lines, 1)
        if text.strip() == "data = broadcast_tensor_dict(src=0)"
        or text.strip().startswith('broadcast_tensor_dict({"k"')
    )
    assert len(sites) == 2
    good = Project([extract_source(WORKERS + FOLDED, PATH)])
    assert verify_fold(before, good, PATH, "SpecWorker", sites) is None
    wrong = {
        # the scorer's first step without speculation is not handed the dict
        "not handed": (
            "self.scorer.execute_model(received=received)",
            "self.scorer.execute_model()",
        ),
        # the later proposer steps are handed the dict the first one was: they receive
        # nothing, the driver sends theirs
        "handed again in the loop": (
            "            self.proposer.execute_model(received=received)\n            received = None\n",
            "            self.proposer.execute_model(received=received)\n",
        ),
        # after the scorer, the proposer is handed the scorer's dict
        "handed again after": (
            "            self.scorer.execute_model(received=received)\n            received = None\n",
            "            self.scorer.execute_model(received=received)\n",
        ),
    }
    for why, (old, new) in wrong.items():
        source = (WORKERS + FOLDED).replace(old, new)
        assert source != WORKERS + FOLDED, why
        after = Project([extract_source(source, PATH)])
        failed = verify_fold(before, after, PATH, "SpecWorker", sites)
        assert failed is not None and "after the rewrite" in failed, why
        # check reports the hang (RC112) where it does not depend on the loop count:
        # the driver's count, sent as extras, is not tied to the one the others read
        codes = {f.code for f in check_sources({PATH: source}).findings}
        assert ("RC112" in codes) == (why != "handed again in the loop"), why


@pytest.mark.parametrize(
    ("change", "shape", "says"),
    [
        # an inner step that cannot be handed a dict
        (
            (
                "execute_model(self, execute_model_req=None, received=None)",
                "execute_model(self, execute_model_req=None)",
            ),
            "first inner step differs between paths",
            "a `received` argument",
        ),
        # a proposer that may be one whose step never broadcasts (vLLM's n-gram proposer)
        (
            (
                "class SpecWorker:\n    def __init__(self, proposer: Worker,",
                "class NGram:\n    def execute_model(self, execute_model_req=None, received=None):\n"
                "        return []\n\n\nclass SpecWorker:\n"
                "    def __init__(self, proposer: Worker | NGram,",
            ),
            "first inner step differs between paths",
            "proposer's step (NGram) never broadcasts (no dict to hand it)",
        ),
        # the other ranks can leave the step with the dict received and handed to none
        (
            (
                '        if data["no_spec"]:\n            self.scorer',
                '        if data["k"] > 7:\n            return True\n        if data["no_spec"]:\n            self.scorer',
            ),
            "exit before the first inner step",
            "could go to no step",
        ),
        # a first inner step called with arguments of its own
        (
            (
                '        if data["no_spec"]:\n            self.scorer.execute_model()',
                '        if data["no_spec"]:\n            self.scorer.execute_model(None)',
            ),
            "first inner step called with arguments",
            "called with arguments",
        ),
        # the name the dict would be bound to is taken
        (
            (
                "        if not data:\n            return False\n",
                "        if not data:\n            return False\n        received = 0\n",
            ),
            "name taken",
            "already binds `received`",
        ),
    ],
)
def test_refuses_and_names_the_shape(change: tuple[str, str], shape: str, says: str) -> None:
    old, new = change
    source = (WORKERS + DRIVER).replace(old, new)
    assert source != WORKERS + DRIVER
    after, changed, skipped = rewrite(source)
    assert (after, changed) == (source, [])
    assert [(s.code, s.shape) for s in skipped] == [("MIG204", shape)]
    assert says in skipped[0].message


def _migrated_engine(tmp_path: Path) -> tuple[Path, Path]:
    """(the package of the wrapper of vLLM 0.6.x's shape, that package after
    ``migrate --select fold-control-broadcast``)."""
    engine = tmp_path / "engine"
    before = copy_before(tmp_path / "before" / "spec_decode", V06_WORKER)
    shutil.copytree(before, engine / "spec_decode")
    shutil.copytree(
        SPEC_DECODE.parent / "merged",
        engine / "merged",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    result = migrate([engine], select=[fold.NAME])
    assert (result.refusals, result.notes) == ([], [])
    target = engine / "spec_decode" / "spec_decode_worker.py"
    assert list(result.changes) == [target]
    target.write_bytes(result.changes[target].new)
    return before, engine / "spec_decode"


def test_check_on_the_engines_wrapper_before_and_after(tmp_path: Path) -> None:
    before, after = _migrated_engine(tmp_path)
    found = check_paths([before]).findings
    assert [(f.code, f.severity) for f in found] == [("RC110", "error")]
    assert check_paths([after]).findings == []
    assert "received=received" in (after / "spec_decode_worker.py").read_text()


@pytest.mark.slow
def test_the_folded_wrapper_keeps_the_tokens_with_one_broadcast_less_per_step(
    tmp_path: Path,
) -> None:
    """At tp 2 (gloo), every path of the wrapper (speculation, a prefill, speculation
    disabled for the batch): the same tokens, k + 2 -> k + 1, 3 -> 2 and 2 -> 1
    broadcasts per step, counted by the engine."""
    k = 3
    before, after = _migrated_engine(tmp_path)
    legacy = run_engine(
        "merged", tp=2, steps=10, seed=3, num_speculative_tokens=k, spec_decode_dir=str(before)
    )
    folded = run_engine(
        "merged", tp=2, steps=10, seed=3, num_speculative_tokens=k, spec_decode_dir=str(after)
    )
    assert set(legacy["broadcasts_per_step_list"]) == {k + 2, 3, 2}
    assert [n - 1 for n in legacy["broadcasts_per_step_list"]] == folded["broadcasts_per_step_list"]
    assert folded["num_tokens"] == legacy["num_tokens"] > 0
    assert folded["tokens_sha256"] == legacy["tokens_sha256"]
