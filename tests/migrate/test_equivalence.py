"""``migrate`` verifies each rewritten group with the step semantics: at every entry
point of the step, a non-driver rank must hold the same literal flags before and after
the rewrite. The legacy variant's non-driver branch builds its sampling metadata with
``perform_sampling=False``; a planted rewrite that drops the flag (the rebuilt metadata
then takes the class default) is refused, naming the entry point, the value and both
sides, and nothing is written; with the check disabled the same rewrite is written."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import libcst as cst
import pytest

from codemods import verify
from codemods.merge_broadcasts import rewrite
from tests.migrate.conftest import FIXTURES, copy_tree, snapshot

OVERRIDE = "            perform_sampling=False,\n"


def legacy_variant(target: Path) -> Path:
    """The after-split legacy engine whose non-driver ranks never sample."""
    work = copy_tree(FIXTURES / "after_split" / "before", target)
    runner = work / "model_runner.py"
    text = runner.read_text()
    count = "                num_prompts=0,\n"
    assert text.count(count) == 1
    runner.write_text(text.replace(count, count + "                perform_sampling=False,\n"))
    return work


def plant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite, with the non-driver's override dropped from the runner it writes."""
    finish = rewrite.finish

    def planted(
        path: Path, module: cst.Module, used_before: set[str]
    ) -> tuple[cst.Module, str, ast.Module]:
        module, code, tree = finish(path, module, used_before)
        if path.name == "model_runner.py" and OVERRIDE in code:
            code = code.replace(OVERRIDE, "")
            return cst.parse_module(code), code, ast.parse(code)
        return module, code, tree

    monkeypatch.setattr(rewrite, "finish", planted)


def test_unplanted_rewrite_keeps_the_non_driver_value(tmp_path: Path, migrate_cli) -> None:
    work = legacy_variant(tmp_path / "engine")
    assert migrate_cli(str(work)).code == 0  # written
    assert OVERRIDE in (work / "model_runner.py").read_text()


def test_a_planted_change_of_a_non_driver_value_is_refused(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    work = legacy_variant(tmp_path / "engine")
    before = snapshot(work)
    monkeypatch.chdir(work)
    data = json.loads(migrate_cli("--format", "json", ".").out)
    assert snapshot(work) == before  # nothing written
    refusal = next(r for r in data["refusals"] if r["code"] == "MIG111")
    assert (
        "at Worker.execute_model with ModelRunner, a non-driver rank built "
        "SamplingMetadata(perform_sampling=False) before the rewrite and gets its default "
        "after it"
    ) in refusal["message"]


def test_with_the_check_disabled_the_planted_change_is_written(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    monkeypatch.setattr(verify, "changed_values", lambda old, new, config: [])
    work = legacy_variant(tmp_path / "engine")
    assert migrate_cli(str(work)).code == 0
    assert OVERRIDE not in (work / "model_runner.py").read_text()


LEGACY = """
class ModelRunner(ModelRunnerBase):
    def prepare_input_tensors(self, seqs):
        if self.is_driver_worker:
            tokens = self._tokens(seqs)
            sampling = SamplingMetadata(seq_groups=seqs, tokens=tokens)
            broadcast_tensor_dict({"tokens": tokens}, src=0)
        else:
            tokens = broadcast_tensor_dict(src=0)["tokens"]
            sampling = SamplingMetadata(seq_groups=None, tokens=tokens, perform_sampling=False)
        return tokens, sampling

    def execute_model(self, seqs, kv_caches):
        tokens, sampling = self.prepare_input_tensors(seqs)
        return self.sampler(self.model(tokens), sampling)

    def profile_run(self, seqs):
        self.execute_model(seqs, [])
"""

MERGED = """
class ModelRunner(ModelRunnerBase):
    def prepare_model_input(self, seqs):
        tokens = self._tokens(seqs)
        return ModelInput(tokens, SamplingMetadata(seq_groups=seqs, tokens=tokens))

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        sampling = SamplingMetadata(
            seq_groups=None, tokens=tensor_dict["tokens"], perform_sampling=False
        )
        return ModelInput(tensor_dict["tokens"], sampling)

    def execute_model(self, model_input, kv_caches):
        return self.sampler(self.model(model_input.tokens), model_input.sampling)

    def profile_run(self, seqs):
        self.execute_model(self.prepare_model_input(seqs), [])
"""


def test_profile_run_preparing_locally_changes_the_non_driver_flag() -> None:
    """The fork's case: the legacy profile run took the non-driver branch (no sampling
    on ranks without the logits); merged, every rank prepares the dummy input itself and
    the non-driver gets the driver's default."""
    from runnercheck.analysis.extract import extract_source
    from runnercheck.config import Config

    old = {Path("model_runner.py"): extract_source(LEGACY, "model_runner.py")}
    new = {Path("model_runner.py"): extract_source(MERGED, "model_runner.py")}
    changes = verify.changed_values(old, new, Config())
    assert [c.describe() for c in changes] == [
        "at ModelRunner.profile_run, a non-driver rank built "
        "SamplingMetadata(perform_sampling=False) before the rewrite and gets its default "
        "after it"
    ]
