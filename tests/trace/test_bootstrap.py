"""The start-up hook of a traced run, in a real child interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runnercheck.trace import TraceOptions, TraceSession

CHILD = """
import os, sys
print("user sitecustomize ran:", os.environ.get("USER_SITE_MARK") == "1")
print("torch.distributed imported at start:", "torch.distributed" in sys.modules)
if sys.argv[1] == "torch":
    from torch.distributed import all_reduce  # bound by name after start-up
    print("bound name is the recorder's:", all_reduce.__module__ == "runnercheck.trace.recorder")
"""


def test_hook_keeps_the_hidden_sitecustomize_and_wraps_names_bound_later(tmp_path: Path) -> None:
    user_site = tmp_path / "user_site"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_MARK'] = '1'\n")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(user_site)
    try:
        with TraceSession(TraceOptions(deadline=30)) as session:
            directory = session.directory
            outputs = [
                subprocess.run(
                    [sys.executable, str(script), kind],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=True,
                ).stdout
                for kind in ("plain", "torch")
            ]
            files = sorted(path.suffix for path in directory.iterdir() if path.is_file())
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    assert os.environ.get("PYTHONPATH") == old
    plain, torch_child = outputs
    assert "user sitecustomize ran: True" in plain
    assert "torch.distributed imported at start: False" in plain
    assert "bound name is the recorder's: True" in torch_child
    # No collective ran: no trace file; the torch child registered its stack dump.
    assert files == [".stack"]
    assert session.report is not None and session.report.worlds == []
