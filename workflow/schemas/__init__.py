"""Package data `grumem.schemas`: the JSON Schema of the config and of every record.

An `__init__.py` makes this directory the package pyproject.toml maps it to, so
`pip install .` ships the schemas and grumem.io.paths finds them with
importlib.resources; the workflow and the library read these same files.
"""
