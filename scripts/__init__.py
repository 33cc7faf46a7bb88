"""The project's experiments and benchmarks, run from the clone's root as modules:
``.venv/bin/python -m scripts.NAME`` (``scripts.protocol``: the benchmark protocol they share; ``scripts.timing``:
the speed benchmarks' helpers). Build tooling lives apart, in ``scripts.build``."""
