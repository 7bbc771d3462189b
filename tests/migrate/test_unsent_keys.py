"""Verification refuses a rewrite whose result reads a key that no sender puts (RC111):
a generated helper that pops a key the input's dict never carries would raise KeyError
on every non-driver rank, which only a run at tensor-parallel size > 1 would show."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.merge_broadcasts import shared_helpers
from tests.migrate.conftest import copy_tree, snapshot

LEGACY = Path(__file__).resolve().parents[2] / "runnercheck" / "demo" / "engine" / "legacy"
SENT = '"selected_token_indices")'


def test_a_generated_helper_reading_an_unsent_key_is_refused(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = copy_tree(LEGACY, tmp_path / "legacy")
    before = snapshot(work)
    laid_out = shared_helpers._laid_out
    planted: list[str] = []

    def misspelt(text: str, width: int = 79) -> str:
        if SENT in text:  # the shared sampling-metadata helper pops the key
            planted.append(text)
            text = text.replace(SENT, '"selected_token_indicesX")')
        return laid_out(text, width)

    monkeypatch.setattr(shared_helpers, "_laid_out", misspelt)
    result = migrate_cli(str(work))
    assert planted, "the demo engine no longer shares the sampling-metadata helper"
    assert ": MIG110 " in result.out, result.out
    assert "RC111" in result.out and "'selected_token_indicesX'" in result.out, result.out
    assert "_init_sampling_metadata_from_tensor_dict" in result.out, result.out
    assert snapshot(work) == before


def test_the_same_engine_migrates_when_the_helper_pops_the_sent_key(
    tmp_path: Path, migrate_cli
) -> None:
    work = copy_tree(LEGACY, tmp_path / "legacy")
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    assert SENT in (work / "model_runner_base.py").read_text()
