"""A worker whose driver sends one value and goes on with another under the name its
other ranks bind the received key to (vLLM 0.5.0's CPU worker sends the request's
list of blocks to copy but copies with the tensor it built) has that latent bug
carried over with a note at the line where the driver rebinds it, as it is after the
rewrite; a worker that sends what it uses gets none."""

from __future__ import annotations

from pathlib import Path

from codemods.framework.pipeline import MERGE, migrate
from tests.migrate.conftest import FIXTURES, copy_tree

SENT = '            "blocks_to_swap": blocks_to_swap,  # swapped before the model runs\n'
READ = '        self.swap(data["blocks_to_swap"])\n'
BUILT = "        blocks_to_swap = torch.tensor(request.blocks_to_swap, dtype=torch.int64)\n"


def _engine(root: Path, sends_the_request: bool) -> Path:
    work = copy_tree(FIXTURES / "engine" / "before", root / "engine")
    text = (work / "worker.py").read_text()
    assert text.count(SENT) == 1 and text.count(READ) == 1
    text = text.replace(
        READ, '        blocks_to_swap = data["blocks_to_swap"]\n        self.swap(blocks_to_swap)\n'
    )
    if sends_the_request:
        text = text.replace(SENT, SENT.replace(": blocks_to_swap", ": request.blocks_to_swap"))
    (work / "worker.py").write_text(text)
    return work


def _notes(work: Path) -> tuple[list[tuple[int, str]], str]:
    result = migrate([work], select=(MERGE,))
    assert not result.refusals, result.refusals
    new = result.changes[work / "worker.py"].new.decode()
    notes = [
        (line, text)
        for group in result.groups
        for path, line, text in group.worker_notes
        if Path(path) == work / "worker.py" and "goes on with its own" in text
    ]
    return notes, new


def test_a_value_sent_unlike_the_one_the_driver_uses_gets_a_note(tmp_path: Path) -> None:
    work = _engine(tmp_path, sends_the_request=True)
    notes, new = _notes(work)
    assert len(notes) == 1, notes
    line, text = notes[0]
    assert new.splitlines()[line - 1] == BUILT.rstrip("\n"), (line, new)
    assert "Worker's driver goes on with its own `blocks_to_swap = torch.tensor(" in text
    assert "sends `request.blocks_to_swap` as `blocks_to_swap`" in text


def test_a_worker_that_sends_what_it_uses_gets_no_note(tmp_path: Path) -> None:
    notes, _new = _notes(_engine(tmp_path, sends_the_request=False))
    assert notes == []


def test_a_key_read_with_get_that_the_driver_always_sets_is_not_optional(
    tmp_path: Path,
) -> None:
    """The GPU worker alone (no CPU worker to share its input with) reads the blocks
    with ``data.get(...)``, but its driver always sends the tensor it builds: the
    field is ``torch.Tensor``, not ``Optional`` (passed to ``swap(blocks_to_swap:
    torch.Tensor)``, an ``Optional`` field was a new plain-mypy message)."""
    work = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    for name in ("cpu_worker.py", "cpu_model_runner.py"):
        (work / name).unlink()
    text = (work / "worker.py").read_text()
    assert text.count(READ) == 1
    (work / "worker.py").write_text(
        text.replace(READ, READ.replace('data["blocks_to_swap"]', 'data.get("blocks_to_swap")'))
    )
    result = migrate([work], select=(MERGE,))
    assert not result.refusals, result.refusals
    new = result.changes[work / "worker.py"].new.decode()
    fields = new[new.index("class WorkerInput") :].split("def ")[0]
    assert "    blocks_to_swap: torch.Tensor\n" in fields, fields
    assert [n.message for n in result.notes if n.kind == "mypy"] == []
