"""The engine in the two-broadcast shape (as vLLM 0.5.0): the worker broadcasts the cache
operations, then the model runner broadcasts its own metadata."""
