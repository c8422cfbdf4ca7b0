"""Where the package's data files are: the JSON Schemas and the prompt templates.

They ship inside the package (`grumem.schemas` is `workflow/schemas/`,
`grumem.templates` is `templates/`, mapped in pyproject.toml), so an installed
grumem reads its own copy wherever it runs, and an editable install reads the
checkout's files: the workflow validates with, and its rules pass, the very
files the library reads. Nothing here knows where a checkout is.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from grumem.errors import GrumemError


def package_dir(package: str) -> Path:
    """The directory of a data package, as a path on disk.

    Rules pass the templates to jobs as Snakemake inputs, which are files, so
    an install whose resources are not files (a zip) is refused here, by name,
    rather than in a job.
    """
    root = files(package)
    if not isinstance(root, Path):
        raise GrumemError(
            f"{package} is not installed as files on disk ({root!r}); "
            "install grumem with pip into a directory, not as a zip"
        )
    return root


SCHEMAS_DIR = package_dir("grumem.schemas")
TEMPLATES_DIR = package_dir("grumem.templates")
