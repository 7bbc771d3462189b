"""Function bodies a run leaves unparsed (:mod:`codemods.toolkit.unparsed`): a module prints back
what was read, every way into an unparsed body raises ``NeedsBody``, a search passes
over the bodies that cannot hold what it looks for, and a run that asks for a body
gives what a run that parsed every body gives."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.framework import tasks
from codemods.framework.pipeline import migrate
from codemods.toolkit import cstutil, node_index, unparsed
from codemods.toolkit.kept_text import kept_text
from codemods.toolkit.unparsed import NeedsBody, UnparsedBlock
from runnercheck.contract import VLLM
from tests.vllm_wheels import vllm_package

SOURCE = '''\
import os


class Runner:
    # a comment before the first method
    def step(self, x):
        return broadcast_tensor_dict(x)

    def calls_step(self):
        return self.step(1)

    def helper(self, y):
        # a comment before the first statement
        z = y + 1
        if z:
            return z
            # the if block's last line
        # the function block's last line

    @property
    def value(self) -> int:
        """Docstring."""
        self.x: Optional[int] = None
        return 1

    def one_line(self): return 2


class Other:
    def step(self):
        return 3


def free(a,
         b):
    total = a + b
    return total
'''

WORDS = frozenset({"broadcast_tensor_dict"})


def _parsed(source: str = SOURCE, words: frozenset[str] = WORDS) -> cst.Module:
    module = unparsed.parse(source.encode(), ast.parse(source), words)
    assert module is not None
    return module


def _functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    """The module's functions and methods, by qualified name."""
    out: dict[str, cst.FunctionDef] = {}
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            out[statement.name.value] = statement
        elif isinstance(statement, cst.ClassDef):
            for item in cstutil.body_of(statement.body):
                if isinstance(item, cst.FunctionDef):
                    out[f"{statement.name.value}.{item.name.value}"] = item
    return out


def test_bodies_that_name_no_word_are_left_unparsed_and_the_module_prints_back() -> None:
    module = _parsed()
    assert module.code == SOURCE
    left = {name for name, f in _functions(module).items() if type(f.body) is UnparsedBlock}
    # step names a word, calls_step names step; a one-line suite is not an indented block;
    # another class's step shares a name with Runner.step but names nothing
    assert left == {"Runner.helper", "Runner.value", "Other.step", "free"}
    assert (
        unparsed.parse(SOURCE.encode(), ast.parse(SOURCE), frozenset({"os", "y", "a"})) is not None
    )
    none_left = unparsed.parse(SOURCE.encode(), ast.parse(SOURCE), frozenset({"self", "a"}))
    assert none_left is None  # every body names a word


def test_every_way_into_an_unparsed_body_raises() -> None:
    module = _parsed()
    block = _functions(module)["Runner.helper"].body
    assert isinstance(block, UnparsedBlock)
    ways: list[Any] = [
        lambda: block.body,
        lambda: block.children,
        lambda: block.visit(cst.CSTVisitor()),
        lambda: block.deep_equals(block),
        lambda: block.with_changes(footer=()),
        lambda: module.visit(cst.CSTTransformer()),
        lambda: node_index.nodes(module),
        lambda: node_index.span(module.body[1]),
        lambda: cstutil.find_all(module, cst.Name),
        lambda: cstutil.find_all(module, cst.Assign),
        lambda: cstutil.contains(module, lambda node: False),
        lambda: node_index.children(block),
        lambda: cstutil.walk(module, cst.CSTVisitor()),
    ]
    for way in ways:
        with pytest.raises(NeedsBody) as raised:
            way()
        assert "helper" in raised.value.names


def test_an_index_that_copies_another_keeps_its_unparsed_blocks() -> None:
    """An index over the class copies the listing of its method's index, made first."""
    module = _parsed()
    helper = _functions(module)["Runner.helper"]
    with pytest.raises(NeedsBody):
        node_index.nodes(helper)
    assert node_index.indexed(helper)
    with pytest.raises(NeedsBody) as raised:
        node_index.nodes(module.body[1])
    assert raised.value.names == {"helper", "value"}
    assert cstutil.find_all(module.body[1], cst.Await) == []


def test_a_search_passes_over_bodies_that_cannot_hold_its_kind_or_words() -> None:
    module = _parsed()
    runner = module.body[1]
    with pytest.raises(NeedsBody) as raised:
        cstutil.find_all(runner, cst.AnnAssign)
    assert raised.value.names == {"value"}
    assert cstutil.find_all(runner, cst.Await) == []
    assert cstutil.find_all(runner, cst.Assign, words=("nothing_named_so",)) == []
    with pytest.raises(NeedsBody):
        cstutil.find_all(runner, cst.Assign, words=("z",))
    calls = cstutil.find_all(runner, cst.Call, words=("broadcast_tensor_dict", "step"))
    assert [cstutil.code(c) for c in calls] == ["broadcast_tensor_dict(x)", "self.step(1)"]
    # what holds what is read without entering a body
    step = _functions(module)["Runner.step"]
    assert id(runner) in cstutil.holding(runner, [id(calls[0])])
    assert id(step) in cstutil.holding(runner, [id(calls[0])])
    assert cstutil.within(runner, calls[0])
    helper = _functions(module)["Runner.helper"].body
    assert isinstance(helper, UnparsedBlock)
    assert cstutil.within(runner, helper.footer[0]) and cstutil.within(runner, helper.header)


def test_words_are_identifiers_of_any_script() -> None:
    source = "class C:\n    def f(self):\n        self.modèle = 1\n"
    module = _parsed(source, frozenset({"broadcast_tensor_dict"}))
    with pytest.raises(NeedsBody):
        cstutil.find_all(module.body[0], cst.Assign, words=("modèle",))
    assert cstutil.find_all(module.body[0], cst.Assign, words=("modè",)) == []


#: characters that make and break words: letters, digits of two kinds (``²`` is a digit
#: but no decimal one, so it starts a word), an underscore, non-ASCII letters, others
_WORD_TEXT = st.text(alphabet="ab_12²é٣ .\n(", max_size=14)


@settings(max_examples=500, deadline=None)
@given(
    _WORD_TEXT,
    st.lists(st.sampled_from(["ab", "a", "b_", "é", "ab1", "_a", "b"]), max_size=3),
    st.data(),
)
def test_a_stretch_names_a_word_as_the_words_of_its_text_say(
    text: str, words: list[str], data: st.DataObject
) -> None:
    """The search for words (each found once in the whole text) answers what reading
    every word of the stretch answers, ``but`` aside."""
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    but = data.draw(st.sampled_from(["", *words]))
    read = set(unparsed._WORD.findall(text, start, end))
    expected = any(w in read for w in words if w != but)
    assert unparsed._Words(text).named(words, (start, end), but) is expected


def test_printed_where_it_was_not_read_an_unparsed_body_asks_for_its_statements() -> None:
    module = _parsed()
    free = _functions(module)["free"]
    assert cstutil.code(free) == "\n\n" + SOURCE[SOURCE.index("def free") :]
    nested = cst.Module(
        body=[cst.ClassDef(name=cst.Name("Other"), body=cst.IndentedBlock(body=[free]))]
    )
    with pytest.raises(NeedsBody):
        cstutil.node_code(nested, nested)
    crlf = module.with_changes(default_newline="\r\n")
    with pytest.raises(NeedsBody):
        cstutil.node_code(crlf, crlf)
    two = module.with_changes(default_indent="  ")
    with pytest.raises(NeedsBody):
        cstutil.node_code(two, two)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xef\xbb\xbf" + SOURCE.encode(), "a byte-order mark"),
        (("# -*- coding: latin-1 -*-\n" + SOURCE + "x = 'é'\n").encode("latin-1"), "not UTF-8"),
        (SOURCE.replace("z = y + 1\n", "z = y + 1\r\n").encode(), "line endings of two kinds"),
        (
            ("# -*- coding: latin-1 -*-\n" + SOURCE + "x = 'é'\n").encode("utf-8"),
            "bytes that read as UTF-8 in a file that says it is Latin-1",
        ),
    ],
)
def test_texts_it_does_not_read(data: bytes, why: str) -> None:
    assert unparsed.parse(data, ast.parse(data), WORDS) is None, why


def test_a_last_line_without_a_line_break_is_parsed() -> None:
    source = SOURCE.rstrip("\n")
    module = unparsed.parse(source.encode(), ast.parse(source), WORDS)
    assert module is not None and module.code == source
    assert type(_functions(module)["free"].body) is not UnparsedBlock


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.3", "0.5.0"])
def test_real_files_print_back_and_keep_the_text_of_their_statements(version: str) -> None:
    """Every ``worker/`` file of a release with every body it can leave unparsed: the
    module prints the file, and each top-level statement keeps the text a whole parse
    gives it."""
    files = sorted((vllm_package(version) / "worker").glob("*.py"))
    left = 0
    for path in files:
        text = path.read_text("utf-8")
        tree = ast.parse(text)
        module = unparsed.parse(text.encode(), tree, frozenset())
        if module is None:
            continue
        assert module.code == text, path
        whole = cst.parse_module(text.encode())
        found, expected = kept_text(module, tree, text), kept_text(whole, tree, text)
        assert found is not None and expected is not None, path
        for mine, theirs in zip(module.body, whole.body, strict=True):
            assert found.texts[id(mine)] == expected.texts[id(theirs)], path
        left += sum(1 for f in _functions(module).values() if type(f.body) is UnparsedBlock)
    assert left > 20


def _whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unparsed, "parse", lambda *args: None)


def _output(result: Any) -> dict[Path, bytes]:
    return {path: change.new for path, change in result.changes.items()}


@pytest.mark.slow
def test_a_run_on_vllm_0_5_0_leaves_bodies_unparsed_asks_for_none_and_gives_a_whole_runs_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Any] = []
    real = tasks.Run.parse_more
    monkeypatch.setattr(
        tasks.Run, "parse_more", lambda self, names: (asked.append(names), real(self, names))
    )
    left: list[int] = []
    real_parse = unparsed.parse

    def parse(*args: Any) -> cst.Module | None:
        found = real_parse(*args)
        left.append(unparsed.left_out(found) if found is not None else 0)
        return found

    monkeypatch.setattr(unparsed, "parse", parse)
    root = vllm_package("0.5.0")
    result = migrate([root])
    assert len(left) == 5 and sum(left) > 40_000 and asked == []
    _whole(monkeypatch)
    whole = migrate([root])
    assert _output(result) == _output(whole) and result.changes
    assert [str(r) for r in result.refusals] == [str(r) for r in whole.refusals]
    assert [str(n) for n in result.notes] == [str(n) for n in whole.notes]


@pytest.mark.slow
def test_a_group_that_asks_for_an_unparsed_body_is_done_again_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM 0.3.3's runner step calls a helper that builds the sampling metadata with a
    literal driver flag; its body names no word, so it is left unparsed, and the
    planner that rewrites it asks for it."""
    asked: list[Any] = []
    real = tasks.Run.parse_more
    monkeypatch.setattr(
        tasks.Run, "parse_more", lambda self, names: (asked.append(names), real(self, names))
    )
    root = vllm_package("0.3.3")
    result = migrate([root])
    assert asked == [frozenset({"_prepare_sample"})]
    _whole(monkeypatch)
    whole = migrate([root])
    assert _output(result) == _output(whole) and result.changes
    assert [str(r) for r in result.refusals] == [str(r) for r in whole.refusals]


def test_the_contract_words_are_its_names_but_the_driver_flag() -> None:
    words = unparsed.contract_words(VLLM)
    assert {"broadcast_tensor_dict", "execute_model", "WorkerBase"} <= words
    assert VLLM.driver_flag not in words
    assert all(word.isidentifier() for word in words)


ANNOTATED = """\
class Runner:
    def __init__(self, is_driver_worker: bool = False):
        self.is_driver_worker = is_driver_worker
        self.cache: Optional[
            Dict[str, int]] = None  # a comment
        if is_driver_worker:
            self.lora: "LoRA | None" = None
        self.count: int = 0
        return None
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_search_that_only_reads_takes_copies_of_the_statements_of_an_unparsed_body(
    newline: str,
) -> None:
    source = ANNOTATED.replace("\n", newline)
    module = _parsed(source)
    runner = module.body[0]
    assert type(_functions(module)["Runner.__init__"].body) is UnparsedBlock
    whole = cst.parse_module(source)
    for kinds in (cst.AnnAssign, (cst.Assign, cst.Return)):
        found = cstutil.find_read(runner, kinds)
        expected = cstutil.find_all(whole.body[0], kinds)
        assert len(found) == len(expected) == (3 if kinds is cst.AnnAssign else 2)
        for mine, theirs in zip(found, expected, strict=True):  # (whitespace included)
            assert mine.deep_equals(theirs), cstutil.code(mine)
    with pytest.raises(NeedsBody):  # a kind that is not a small statement
        cstutil.find_read(runner, cst.If)
    assert cstutil.find_read(runner, cst.AugAssign) == []  # (none in the body's ast)


@pytest.mark.parametrize(
    "line",
    [
        "a = 1; self.x: int = 0",
        "self.x: int = 0; a = 1",
        "if a: self.x: int = 0",
    ],
)
def test_a_statement_that_shares_its_line_is_not_copied(line: str) -> None:
    source = f"class Runner:\n    def f(self, a):\n        {line}\n"
    module = _parsed(source)
    with pytest.raises(NeedsBody):
        cstutil.find_read(module.body[0], cst.AnnAssign)


def test_bodies_that_assign_a_bound_attribute_are_parsed() -> None:
    source = """\
class Worker:
    def __init__(self):
        self.model_runner = Runner()

    def load(self):
        self.model_runner.load()

    def step(self):
        out = self.model_runner.run()
        return out
"""
    module = unparsed.parse(source.encode(), ast.parse(source), WORDS, frozenset({"model_runner"}))
    assert module is not None
    left = {n for n, f in _functions(module).items() if type(f.body) is UnparsedBlock}
    assert left == {"Worker.load"}
    assert unparsed.parse(source.encode(), ast.parse(source), WORDS) is not None
