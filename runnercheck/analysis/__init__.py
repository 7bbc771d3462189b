"""The one analysis layer: facts read with the stdlib ``ast`` (one parse per file) and
the project view joined across files. ``runnercheck check``, the ``migrate`` codemods
and the demo all ask it every question about the meaning of the code they read.

* :mod:`~runnercheck.analysis.model` -- the facts (picklable, no AST nodes kept);
* :mod:`~runnercheck.analysis.extract` -- one file's text to its facts, built from
  :mod:`~runnercheck.analysis.syntax`, :mod:`~runnercheck.analysis.recognise`,
  :mod:`~runnercheck.analysis.dicts` and :mod:`~runnercheck.analysis.steps`;
* :mod:`~runnercheck.analysis.project` -- the project view: hierarchy, roles, key
  flow and the step walk.
"""
