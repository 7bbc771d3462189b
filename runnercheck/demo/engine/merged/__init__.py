"""The engine in the merged shape (as vLLM 0.5.1): the worker and the model runner each
turn their input into a broadcastable dict, and the worker broadcasts both at once."""
