"""Unit names: the name of a transcript's chunk directory, results/<project>/chunks/<unit>.

The workflow (grumem.core.shards) and the `chunk` stage (--units-under) both name a
transcript's directory with unit_name, here, in one place; UNIT_PATTERN is what
a name may look like: a plain entry of results/, never a path or a dot file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import PurePath
from typing import TYPE_CHECKING

from grumem.errors import GrumemError

if TYPE_CHECKING:
    from os import PathLike

# no path separator and no leading dot: a unit stays a plain entry of results/
UNIT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_UNIT = re.compile(UNIT_PATTERN)
_OTHER = re.compile(r"[^A-Za-z0-9_.-]+")


def unit_name(path: str | PathLike[str]) -> str:
    """The file's name when the constraint accepts it; otherwise a readable ASCII
    rendering of it plus a hash of the exact name, so that names which render
    alike (`é.jsonl`, `è.jsonl`, two Chinese names) stay distinct."""
    name = PurePath(path).name
    if _UNIT.fullmatch(name):
        return name
    slug = _OTHER.sub("_", name).lstrip("_.-")
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug}-{digest}" if slug else f"u-{digest}"


def unit_names(
    project: str | None, paths: Iterable[str], under: str | PathLike[str] | None = None
) -> dict[str, str]:
    """unit name -> file; two files with one name would share a directory `under`
    (default results/<project>/chunks)."""
    where = PurePath(under) if under is not None else PurePath("results", str(project), "chunks")
    prefix = f"project {project}: " if project else ""
    units: dict[str, str] = {}
    for path in paths:
        name = unit_name(path)
        if name in units:
            raise GrumemError(
                f"{prefix}{units[name]} and {path} both make the unit name "
                f"{name!r} ({where / name}): rename one of them"
            )
        units[name] = path
    return units
