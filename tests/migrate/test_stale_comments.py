"""Comments about the broadcasts the merge removes, or naming the removed method, are
removed or renamed with them (built on the ``extra_broadcast`` engine variant with
vLLM 0.4's comments around its second broadcast)."""

from __future__ import annotations

import re
from pathlib import Path

from codemods.framework.pipeline import MERGE, migrate
from codemods.merge_broadcasts.stale_comments import refresh
from tests.migrate import variants

DRIVER = "            broadcast_tensor_dict(metadata_dict, src=0)\n"
RECEIVER = "            if has_images:\n                images = broadcast_tensor_dict(src=0)\n"


def _commented() -> variants.Tree:
    tree = variants.before("extra_broadcast")
    runner = tree["model_runner.py"]
    assert runner.count(DRIVER) == 1 and runner.count(RECEIVER) == 1
    runner = runner.replace(
        DRIVER,
        "            # Broadcast the metadata.\n"
        "            # If the step has images, it sends 2 broadcasts.\n" + DRIVER,
    )
    runner = runner.replace(
        RECEIVER,
        "            # Images are set apart from the other inputs, and broadcasted\n"
        "            # separately.\n" + RECEIVER,
    )
    runner = runner.replace(
        "    def execute_model(",
        "    # The driver's inputs come from prepare_input_tensors.\n    def execute_model(",
        1,
    )
    tree["model_runner.py"] = runner
    return tree


def test_comments_about_removed_broadcasts_go_with_them(tmp_path: Path) -> None:
    root = variants.write(_commented(), tmp_path / "engine")
    result = migrate([root], select=(MERGE,))
    new = result.changes[root / "model_runner.py"].new.decode()
    comments = [line.strip() for line in new.splitlines() if line.strip().startswith("#")]
    stale = re.compile(r"2 broadcasts|separately|of their own|prepare_input_tensors")
    assert [c for c in comments if stale.search(c)] == []
    assert "# The driver's inputs come from prepare_model_input." in comments
    assert "# Images are set apart from the other inputs, and broadcasted" not in comments
    compile(new, "model_runner.py", "exec")


def test_only_the_lines_the_migration_wrote_lose_comments() -> None:
    old = "def f():\n    # it sends 2 broadcasts\n    g()\n"
    moved = "def f():\n    g()\n\n\ndef h():\n        # it sends 2 broadcasts\n    g()\n"
    assert refresh(old, old, {}) == old  # an untouched line keeps its comment
    assert "2 broadcasts" not in refresh(old, moved, {})
    # a comment that says to broadcast stays where something is still sent
    sends = "def f():\n    # Broadcast the metadata.\n    broadcast_tensor_dict(d)\n"
    assert refresh("", sends, {}) == sends
    quiet = "def f():\n    # Broadcast the metadata.\n    return d\n"
    assert refresh("", quiet, {}) == "def f():\n    return d\n"
    # text in a string is no comment
    text = 's = "# it sends 2 broadcasts"  # calls prepare_input_tensors\n'
    renamed = refresh("", text, {"prepare_input_tensors": "prepare_model_input"})
    assert renamed == 's = "# it sends 2 broadcasts"  # calls prepare_model_input\n'
