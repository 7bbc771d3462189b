"""``line_map``'s matcher answers what difflib's answers, on made-up sequences full of
ties and on the rewrites ``migrate`` makes."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.framework.pipeline import migrate
from codemods.toolkit import positions
from codemods.toolkit.positions import LongMatches
from runnercheck.demo.engine import engine_source_dir
from tests.migrate.conftest import FIXTURES, copy_tree


def _same_as_difflib(a: list[str], b: list[str]) -> None:
    expected = difflib.SequenceMatcher(None, a, b, autojunk=False)
    found = LongMatches(None, a, b, autojunk=False)
    assert found.get_matching_blocks() == expected.get_matching_blocks()
    assert found.get_opcodes() == expected.get_opcodes()


@st.composite
def _edited(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """A sequence over a few elements (many ties) and an edit of it: stretches
    inserted, deleted, replaced or copied from elsewhere."""
    alphabet = st.sampled_from("abcde"[: draw(st.integers(1, 5))])
    a = draw(st.lists(alphabet, max_size=120))
    b = list(a)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(b)))
        size = draw(st.integers(1, 12))
        kind = draw(st.sampled_from(["insert", "delete", "copy"]))
        if kind == "insert":
            b[at:at] = draw(st.lists(alphabet, min_size=1, max_size=size))
        elif kind == "delete":
            del b[at : at + size]
        elif a:
            start = draw(st.integers(0, len(a) - 1))
            b[at:at] = a[start : start + size]
    return (b, a) if draw(st.booleans()) else (a, b)


@pytest.mark.parametrize("sample", [1, 2, 3, 8, 32])
@settings(max_examples=150, deadline=None)
@given(pair=_edited())
def test_blocks_and_opcodes_are_difflibs(pair: tuple[list[str], list[str]], sample: int) -> None:
    kept = positions._SAMPLE
    positions._SAMPLE = sample
    try:
        _same_as_difflib(*pair)
    finally:
        positions._SAMPLE = kept


def test_ties_go_first_in_a_then_first_in_b() -> None:
    # two longest blocks in a (x x at 0 and at 3), each twice in b
    _same_as_difflib(list("xxaxxb"), list("cxxdxx"))
    _same_as_difflib(list("ab" * 40), list("ba" * 40))
    _same_as_difflib([], list("abc"))
    _same_as_difflib(list("abc"), [])


def test_junk_is_refused() -> None:
    with pytest.raises(ValueError, match="no junk"):
        LongMatches(None, ["a"], ["a"], autojunk=True)


def test_a_long_kept_stretch_is_found_without_reading_every_element(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [f"line {i % 7}" for i in range(400)]
    new = [*lines[:150], "inserted", *lines[150:390]]
    steps: list[int] = []
    longest = LongMatches._longest

    def counted(self: LongMatches, *args: int) -> tuple[int, int, int]:
        steps.append(args[-1])
        return longest(self, *args)

    monkeypatch.setattr(LongMatches, "_longest", counted)
    _same_as_difflib(lines, new)
    assert steps[0] == positions._SAMPLE and steps[1] != 1, steps


def _rewrites(tree: Path) -> list[tuple[list[str], list[str]]]:
    result = migrate([tree])
    return [
        (change.old.decode().splitlines(), change.new.decode().splitlines())
        for change in result.changes.values()
        if change.old is not None
    ]


@pytest.mark.parametrize(
    "source",
    [FIXTURES / "engine" / "before", engine_source_dir("legacy")],
    ids=["engine-before", "legacy-engine"],
)
def test_the_rewrites_of_fixture_trees(source: Path, tmp_path: Path) -> None:
    pairs = _rewrites(copy_tree(source, tmp_path / "tree"))
    assert pairs
    for old, new in pairs:
        _same_as_difflib(old, new)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("version", ["0.4.2", "0.5.0"])
def test_the_rewrites_of_vllm(version: str, tmp_path: Path) -> None:
    from tests.vllm_wheels import vllm_package

    pairs = _rewrites(copy_tree(vllm_package(version), tmp_path / "vllm"))
    assert len(pairs) >= 4
    for old, new in pairs:
        _same_as_difflib(old, new)
