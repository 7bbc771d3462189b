"""Exit codes and the errors that become a one-line message instead of a traceback."""

from __future__ import annotations

#: Nothing found, nothing changed.
EXIT_CLEAN = 0
#: Findings reported, or files changed / would change.
EXIT_FINDINGS = 1
#: Usage or input error (bad arguments, bad configuration, unreadable file).
EXIT_USAGE = 2
#: Interrupted (Ctrl-C), as shells report a process SIGINT ended.
EXIT_INTERRUPTED = 130


class RunnerCheckError(Exception):
    """An error the CLI reports as one line (``runnercheck: error: ...``) with exit 2."""

    exit_code = EXIT_USAGE


class UsageError(RunnerCheckError):
    """Bad command-line arguments."""


class ConfigError(RunnerCheckError):
    """A configuration file that cannot be read or does not validate."""
