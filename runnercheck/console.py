"""Terminal output: rich on a TTY, plain text otherwise (rich is imported only when used)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console


def is_color_terminal(stream: TextIO) -> bool:
    """True for a real terminal without ``NO_COLOR``: the only case that needs rich."""
    return stream.isatty() and "NO_COLOR" not in os.environ


def make_console(stderr: bool = False) -> Console:
    """A console that colours only a real terminal (and honours NO_COLOR)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    is_tty = is_color_terminal(stream)
    return Console(
        file=stream,
        force_terminal=is_tty,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=not is_tty,
        width=None if is_tty else 200,
    )
