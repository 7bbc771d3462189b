"""``fold-control-broadcast``: the wrapper's control dict travels in the first inner step's
broadcast. Inline before/after sources, the shapes it refuses (each named), the LibCST
command, the engine's speculative mode (the shipped wrapper is the codemod's output) and
vLLM's ``spec_decode_worker.py`` (refused, with the shape)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, TransformFailure, TransformSuccess, transform_module

from benchmarks import spec_decode_vllm
from codemods import fold_control_broadcast as fold
from codemods.framework.pipeline import migrate
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from runnercheck.check import check_sources
from runnercheck.records import Refused
from runnercheck.rules.wrapper_control_broadcast import MIG204_WORKERS
from tests.spec_decode_fixture import BEFORE_WORKER, SPEC_DECODE, copy_before
from tests.vllm_wheels import vllm_source

#: the MIG204 examples' workers, the wrapper reading how many proposer steps follow
WORKER = MIG204_WORKERS + "        k = execute_model_req.lookahead\n"
DRIVER = """\
        # tell the other ranks how many proposer steps follow
        broadcast_tensor_dict({"k": k, "again": k > 2}, src=0)
        for _ in range(max(k, 1)):
            self.proposer.execute_model(execute_model_req)
        out = self.scorer.execute_model(execute_model_req)
        if k > 2:
            self.proposer.execute_model(execute_model_req)
        return out
"""
NON_DRIVER = """\

    def _run_non_driver(self):
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False
        k = data["k"]
        for _ in range(max(k, 1)):
            self.proposer.execute_model()
        self.scorer.execute_model()
        # the later extra step after scoring
        if data["again"]:
            self.proposer.execute_model()
        return True
"""
FOLDED = """\
        # tell the other ranks how many proposer steps follow
        # The control values travel with the first inner step's broadcast.
        execute_model_req.broadcast_extras = {"k": k, "again": k > 2}
        for _ in range(max(k, 1)):
            self.proposer.execute_model(execute_model_req)
        out = self.scorer.execute_model(execute_model_req)
        if k > 2:
            self.proposer.execute_model(execute_model_req)
        return out

    def _run_non_driver(self):
        # The control values come with the first proposer step's broadcast.
        if self.proposer.execute_model() is None:
            return False
        data = self.proposer.received_extras
        k = data["k"]
        for _ in range(max(k, 1) - 1):
            self.proposer.execute_model()
        self.scorer.execute_model()
        # the later extra step after scoring
        if data["again"]:
            self.proposer.execute_model()
        return True
"""


def rewrite(source: str, path: str = "/src/spec.py") -> tuple[str, list[str], list[Refused]]:
    project = Project([extract_source(source, path)])
    module, changed, skipped = fold.rewrite_module(cst.parse_module(source), project, path)
    return module.code, changed, skipped


def test_folds_the_control_broadcast_into_the_first_proposer_step() -> None:
    before = WORKER + DRIVER + NON_DRIVER
    after, changed, skipped = rewrite(before)
    assert (changed, skipped) == (["SpecWorker"], [])
    assert after == WORKER + FOLDED
    # check: RC110 before, nothing after; a second run changes nothing
    assert [f.code for f in check_sources({"/src/spec.py": before}).findings] == ["RC110"]
    assert check_sources({"/src/spec.py": after}).findings == []
    assert rewrite(after) == (after, [], [])


def test_a_receive_without_a_stop_check_and_a_plain_first_step() -> None:
    driver = DRIVER.replace(
        "for _ in range(max(k, 1)):\n            self.proposer", "self.proposer"
    )
    non_driver = NON_DRIVER.replace("        if not data:\n            return False\n", "").replace(
        "for _ in range(max(k, 1)):\n            self.proposer", "self.proposer"
    )
    after, changed, _ = rewrite(WORKER + driver + non_driver)
    assert changed == ["SpecWorker"]
    assert after.endswith(
        """
    def _run_non_driver(self):
        # The control values come with the first proposer step's broadcast.
        self.proposer.execute_model()
        data = self.proposer.received_extras
        k = data["k"]
        self.scorer.execute_model()
"""
        + NON_DRIVER.partition("self.scorer.execute_model()\n")[2]
    )


REFUSALS = [
    # the scorer runs first on a prefill: which step carries the values depends on them
    (
        (
            '        k = data["k"]\n        for _',
            '        k = data["k"]\n        if k == 0:\n            self.scorer.execute_model()\n'
            "        for _",
        ),
        "first inner step differs between paths",
        "scorer",
    ),
    # `range(k)` may run no time
    (
        (
            "for _ in range(max(k, 1)):\n            self.proposer.execute_model()\n        self.s",
            "for _ in range(k):\n            self.proposer.execute_model()\n        self.s",
        ),
        "first inner step in a loop that may not run",
        "range(k)",
    ),
    # the non-driver can leave the step before its first inner step
    (
        (
            '        k = data["k"]\n',
            '        k = data["k"]\n        if k > 7:\n            return True\n',
        ),
        "exit before the first inner step",
        "leave the step",
    ),
    # the inner worker hands no received values back
    (
        ("received_extras", "seen_extras"),
        "inner step without an extras channel",
        "received_extras",
    ),
    # the receive is not a statement of the method's own
    (
        (
            "        data = broadcast_tensor_dict(src=0)\n        if not data:",
            "        try:\n            data = broadcast_tensor_dict(src=0)\n"
            "        except RuntimeError:\n            raise\n        if not data:",
        ),
        "nested broadcast",
        "not a statement of its own",
    ),
    # the first proposer step runs inside a `with` block
    (
        (
            "for _ in range(max(k, 1)):\n            self.proposer.execute_model()\n        self.s",
            "with torch.no_grad():\n            self.proposer.execute_model()\n        self.s",
        ),
        "first inner step under a condition",
        "not run unconditionally",
    ),
]


@pytest.mark.parametrize(("change", "shape", "says"), REFUSALS)
def test_refuses_and_names_the_shape(change: tuple[str, str], shape: str, says: str) -> None:
    before = WORKER + DRIVER + NON_DRIVER
    old, new = change
    assert old in before
    source = before.replace(old, new, 1 if "\n" in old else -1)
    after, changed, skipped = rewrite(source)
    assert (after, changed) == (source, [])
    assert [(s.held_back, s.code, s.shape) for s in skipped] == [
        (("SpecWorker (spec.py)",), "MIG204", shape)
    ]
    assert says in skipped[0].message


def _changed(change: tuple[str, str]) -> str:
    before = WORKER + DRIVER + NON_DRIVER
    old, new = change
    return before.replace(old, new, 1 if "\n" in old else -1)


@pytest.mark.parametrize(
    ("change", "shape"),
    [(("", ""), None), *[(change, shape) for change, shape, _ in REFUSALS]],
    ids=["folds", *[shape for _, shape, _ in REFUSALS]],
)
def test_rc110_is_an_error_exactly_where_the_fold_applies(
    change: tuple[str, str], shape: str | None
) -> None:
    """``check`` asks the fold's own plan: RC110 is an error where the codemod folds the
    control broadcast, and elsewhere a note naming the MIG204 shape that refuses it, so
    that a tree ``migrate`` left as it is passes ``check``."""
    source = _changed(change) if change[0] else WORKER + DRIVER + NON_DRIVER
    _, changed, skipped = rewrite(source)
    assert (changed == ["SpecWorker"]) == (shape is None)
    result = check_sources({"/src/spec.py": source}, select=["RC110"])
    if shape is None:
        assert [f.code for f in result.findings] == ["RC110"]
        assert result.notes == []
        assert "`runnercheck migrate --select fold-control-broadcast`" in result.findings[0].message
        return
    assert [(s.code, s.shape) for s in skipped] == [("MIG204", shape)]
    assert result.findings == []
    assert [f.code for f in result.notes] == ["RC110"]
    message = result.notes[0].message
    assert f"MIG204: {skipped[0].message}" in message
    assert "no automatic fix" in message


def test_the_libcst_command() -> None:
    before = WORKER + DRIVER + NON_DRIVER
    context = CodemodContext(filename="/src/spec.py")
    result = transform_module(fold.FoldControlBroadcastCommand(context), before)
    assert isinstance(result, TransformSuccess) and result.code == WORKER + FOLDED
    refused = before.replace("received_extras", "seen_extras")
    context = CodemodContext(filename="/src/spec.py")
    result = transform_module(fold.FoldControlBroadcastCommand(context), refused)
    assert not isinstance(result, TransformFailure)
    assert result.code == refused and any("MIG204" in w for w in result.warning_messages)


def test_the_engines_wrapper_is_the_codemods_output(tmp_path: Path) -> None:
    """migrate on the engine's speculative package as it was: the shipped wrapper's code
    (its module docstring aside, which describes the new step)."""
    engine = tmp_path / "engine"
    copy_before(engine / "spec_decode")
    merged = SPEC_DECODE.parent / "merged"
    for source in merged.glob("*.py"):
        (engine / "merged").mkdir(exist_ok=True)
        (engine / "merged" / source.name).write_bytes(source.read_bytes())
    result = migrate([engine], select=["fold-control-broadcast"])
    assert result.refusals == []
    target = engine / "spec_decode" / "spec_decode_worker.py"
    text = result.changes[target].new.decode()
    shipped = (SPEC_DECODE / "spec_decode_worker.py").read_text()
    marker = "\nfrom typing import"
    assert text[text.index(marker) :] == shipped[shipped.index(marker) :]
    assert BEFORE_WORKER != text


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_0_8_0_is_refused_with_the_shape(tmp_path: Path) -> None:
    """One release through ``benchmarks/spec_decode_vllm.py`` (the per-release table):
    the codemod refuses naming the shape, nothing is written, and RC110 is a note (no
    error for a broadcast the fold cannot remove), before and after."""
    try:
        vllm_source("0.8.0")
    except RuntimeError as exc:
        pytest.skip(f"vllm==0.8.0 not available: {exc}")
    row = spec_decode_vllm.measure("0.8.0", tmp_path)
    assert (row.rc110_before, row.rc110_notes_before) == (0, 1)
    assert (row.rewritten, row.compiles) == (False, True)
    assert (row.rc110_after, row.rc110_notes_after) == (0, 1)
    assert [(r["code"], r["line"], r["shape"]) for r in row.refused] == [
        ("MIG204", "533", "first inner step differs between paths")
    ]
    assert "scorer_worker (SpecDecodeWorker._run_no_spec:675)" in row.refused[0]["message"]


def test_two_wrappers_in_one_file() -> None:
    wrapper = "class SpecWorker:" + (WORKER + DRIVER + NON_DRIVER).split("class SpecWorker:")[1]
    folded = "class SpecWorker:" + (WORKER + FOLDED).split("class SpecWorker:")[1]
    other = "\n\n" + wrapper.replace("class SpecWorker:", "class OtherSpecWorker:")
    after, changed, skipped = rewrite(WORKER + DRIVER + NON_DRIVER + other)
    assert (changed, skipped) == (["SpecWorker", "OtherSpecWorker"], [])
    assert after == WORKER + FOLDED + "\n\n" + folded.replace(
        "class SpecWorker:", "class OtherSpecWorker:"
    )


@pytest.mark.parametrize(
    ("change", "shape", "parsed"),
    [
        # refused by the plan (the step model alone): LibCST never parses the file
        (("received_extras", "seen_extras"), "inner step without an extras channel", 0),
        # the loop the rewrite would shorten is read from the step model too (check's
        # RC110 asks the same plan)
        (
            ("for _ in range(max(k, 1)):", "for _ in range(k):"),
            "first inner step in a loop that may not run",
            0,
        ),
        # refused by the rewrite (a send that is not a statement of its own): parsed
        (
            ("        broadcast_tensor_dict({", "        sent = broadcast_tensor_dict({"),
            "nested broadcast",
            1,
        ),
    ],
)
def test_libcst_parses_only_a_file_the_plan_would_change(
    tmp_path: Path, change: tuple[str, str], shape: str, parsed: int
) -> None:
    old, new = change
    source = (WORKER + DRIVER + NON_DRIVER).replace(old, new)
    assert source != WORKER + DRIVER + NON_DRIVER
    (tmp_path / "spec.py").write_text(source)
    result = migrate([tmp_path], select=(fold.NAME,))
    assert result.changes == {}
    if parsed:  # the plan applies, the rewrite refuses: left for a person
        assert [(r.code, r.shape) for r in result.refusals] == [("MIG204", shape)]
    else:  # the plan refuses: no fix applies, a note that fails no run
        assert result.refusals == []
        assert [(n.kind, n.code) for n in result.notes] == [("fold", "MIG204")]
        assert f"no automatic fix applies ({shape}): " in result.notes[0].message
    assert result.files_cst == parsed
