"""One module per CLI subcommand.

Each module defines ``HELP`` (one line), ``configure(parser)`` and
``run(args) -> int``; heavy imports happen inside ``run`` so that
``runnercheck --help`` stays fast.
"""
