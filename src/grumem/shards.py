"""A project's units and their shards, as the workflow's input functions see them.

Snakemake calls a rule's input functions once per job. Each one used to
re-glob and re-sort the whole project, so a dry run grew as jobs x files
(issue 16: 5,000 transcripts took 254 s). The workflow now builds one
ProjectShards per project and run (functools.cache in common.smk) and every
input function is a lookup in it.

Shard rule: the source files in sorted order, cut into consecutive runs of
`shard_size`; shard i is named `s{i:03d}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from grumem.errors import GrumemError
from grumem.units import unit_names


@dataclass(frozen=True)
class ProjectShards:
    """project: its name; chunks: the chunk files (a `chunks` project) or the
    `chunk` rule's directories (a `transcripts` project), in sorted order of their
    sources; units: unit name -> transcript file (empty for a `chunks` project);
    shards: shard name -> its chunks, in order."""

    project: str
    chunks: tuple[str, ...]
    units: Mapping[str, str]
    shards: Mapping[str, tuple[str, ...]]

    def shard(self, name: str) -> tuple[str, ...]:
        try:
            return self.shards[name]
        except KeyError:
            raise GrumemError(
                f"project {self.project}: no shard {name!r} "
                f"(it has {len(self.shards)}: s000 to s{len(self.shards) - 1:03d})"
            ) from None

    def transcript(self, unit: str) -> str:
        try:
            return self.units[unit]
        except KeyError:
            raise GrumemError(
                f"project {self.project}: no transcript makes the unit {unit!r}"
                + ("" if self.units else " (the project names chunk files, not transcripts)")
            ) from None


def shard_names(count: int, shard_size: int) -> list[str]:
    """The names of the shards that `count` units fill, `shard_size` to a shard."""
    if shard_size < 1:
        raise GrumemError(f"shard_size must be at least 1, not {shard_size}")
    return [f"s{i:03d}" for i in range(-(-count // shard_size))]


def project_shards(
    project: str, files: Iterable[str], *, chunked: bool, shard_size: int
) -> ProjectShards:
    """The units and shards of a project's source files (chunk files when
    `chunked`, else transcripts, whose chunk directories live under results/)."""
    ordered = sorted(files)
    if chunked:
        units: dict[str, str] = {}
        chunks = tuple(ordered)
    else:
        units = unit_names(project, ordered)
        chunks = tuple(f"results/{project}/chunks/{unit}" for unit in units)
    shards = {
        name: chunks[i * shard_size : (i + 1) * shard_size]
        for i, name in enumerate(shard_names(len(chunks), shard_size))
    }
    return ProjectShards(
        project=project,
        chunks=chunks,
        units=MappingProxyType(units),
        shards=MappingProxyType(shards),
    )
