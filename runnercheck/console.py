"""Terminal output: rich on a TTY, plain text otherwise (rich is imported only when used).

Text output never hands the terminal a control character from a file name or a message
(a file named ``a\\x1b]0;...\\x07.py`` would retitle the window; one holding ``\\r``
would overwrite its own line): :func:`printable` writes each as ``repr`` does, and every
text line goes through it, plain (:func:`echo`) or through rich (the consoles of
:func:`make_console` apply it to every string they render). JSON and SARIF are left
alone: the JSON encoder escapes control characters itself.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

#: C0 controls but tab and newline, DEL, C1 controls.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: ... and newline (text that must stay on its line).
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with its control characters written as ``repr`` writes them (``\\x1b``,
    ``\\r``, ``\\x07``); tabs, other characters and, unless ``newlines`` is False,
    newlines are kept."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(_escaped, text) if pattern.search(text) else text


def echo(text: str, *, stderr: bool = False, newlines: bool = True) -> None:
    """Print ``text`` (lines of text output) to stdout or stderr, made printable."""
    print(printable(text, newlines=newlines), file=sys.stderr if stderr else sys.stdout)


def is_color_terminal(stream: TextIO) -> bool:
    """True for a real terminal without ``NO_COLOR``: the only case that needs rich."""
    return stream.isatty() and "NO_COLOR" not in os.environ


def make_console(stderr: bool = False) -> Console:
    """A console that colours only a real terminal (and honours NO_COLOR) and renders
    every string it prints (table cells and titles included) made printable."""
    from rich.console import Console
    from rich.text import Text

    class PrintableConsole(Console):
        def render_str(self, text: str, **options: Any) -> Text:
            return super().render_str(printable(text), **options)

        def print(self, *objects: Any, **options: Any) -> None:
            if any(not isinstance(o, str) for o in objects):  # a table fits the width
                options.setdefault("soft_wrap", False)
            super().print(*objects, **options)

    stream = sys.stderr if stderr else sys.stdout
    is_tty = is_color_terminal(stream)
    return PrintableConsole(
        file=stream,
        force_terminal=is_tty,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=not is_tty,  # plain lines piped stay whole; tables fit COLUMNS (or 80)
    )


@contextmanager
def working(message: str, quiet: bool = False) -> Iterator[None]:
    """A spinner saying ``message`` on stderr while a step that can take seconds runs:
    only on a colour terminal (never when piped, nor with ``--quiet``), and it leaves
    nothing behind when the step ends."""
    if quiet or not is_color_terminal(sys.stderr):
        yield
        return
    console = make_console(stderr=True)
    with console.status(printable(message, newlines=False), spinner="dots"):
        yield
