"""runnercheck: the model-runner broadcast contract of vLLM-like engines, checked.

Components: ``runnercheck check`` (syntactic rules), the ``mypy_plugin`` package,
``runnercheck migrate`` (the ``codemods`` package) and ``runnercheck fuzz``
(round trips through real torch.distributed broadcasts).
"""

__version__ = "0.1.0"
