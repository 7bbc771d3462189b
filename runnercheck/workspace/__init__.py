"""The workspace: paths in, the facts of their files and the project over them out.

One place reads source for every tool: ``check``, ``migrate`` and its verification.

* :mod:`~runnercheck.workspace.reading`: the files under the given paths, their bytes,
  the byte prefilter, one ``ast`` parse per file, and each file's outcome with the
  code of a failure to read it (RC001, or RC002 for an internal error);
* :mod:`~runnercheck.workspace.cache`: the facts cache, a file's facts read once per
  content;
* :mod:`~runnercheck.workspace.finder`: the module an import names, found on disk
  without importing it, and the modules read for context (partner files, the packages
  the code builds on);
* :mod:`~runnercheck.workspace.facts`: the entry point, :func:`read_facts` (paths and a
  configuration to facts) and :func:`project_of` (facts to the
  :class:`~runnercheck.analysis.project.Project`).

``check`` reads under the shared tree lock of :mod:`runnercheck.writes.reader`.
"""
