"""One module per CLI subcommand of runnercheck's own; :mod:`.registry` finds them, and
the commands of the packages above runnercheck (``migrate`` in :mod:`codemods`, ``mypy``
in :mod:`mypy_plugin`) through their entry points.

Each module defines ``HELP`` (one line), ``configure(parser)`` and
``run(args) -> int``; heavy imports happen inside ``run`` so that
``runnercheck --help`` stays fast.
"""
