"""Package data `grumem.templates`: the GRU-Mem prompt (verbatim) and the judge prompt.

An `__init__.py` makes this directory the package pyproject.toml maps it to, so
`pip install .` ships the templates and grumem.io.paths finds them with
importlib.resources; the workflow's rules pass these same files to their jobs.
"""
