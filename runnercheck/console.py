"""Terminal output: rich on a TTY, plain text otherwise."""

from __future__ import annotations

import os
import sys

from rich.console import Console


def make_console(stderr: bool = False) -> Console:
    """A console that colours only a real terminal (and honours NO_COLOR)."""
    stream = sys.stderr if stderr else sys.stdout
    is_tty = stream.isatty() and "NO_COLOR" not in os.environ
    return Console(
        file=stream,
        force_terminal=is_tty,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=not is_tty,
        width=None if is_tty else 200,
    )
