"""A project's units and their shards, as the workflow's input functions see them.

Snakemake calls a rule's input functions once per job: one that globbed and
sorted the whole project would make a dry run grow as jobs x files. The
workflow builds one ProjectShards per project and run (functools.cache in
common.smk) and every input function is a lookup in it.

Two shard rules (config `shard_rule`), both over the source files in sorted order:

- `sorted` (the default): consecutive runs of `shard_size` files; shard i is
  named `s{i:03d}`. One file added near the front moves every later file to
  another shard, and every shard's jobs run again.
- `stable`: content-defined boundaries. A file whose key (its path below the
  glob's fixed directory, see glob_root) hashes to 0 modulo `shard_size`
  starts a new shard, and so does the file after `4 * shard_size` files
  without one (the cap). A shard is named `s` + the first 12 hex digits of the
  sha256 of its first file's key: names do not depend on position. Shards
  hold `shard_size` files on average. A file added lands in the shard of the
  file before it, or starts a new one that takes the tail of that shard: one
  or two shards change and every other shard keeps its name and files. Only
  a run longer than the cap (about e**-4 of them) shifts its forced cuts, and
  then only within that run.

The corpus lists trajectories in the log's order, shard after shard and, in
a shard, query by query: a project's partition decides the order of its
corpus rows (not their bytes), so changing a project's rule reorders its corpus.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import MappingProxyType

from grumem.core.units import unit_names
from grumem.errors import GrumemError

SHARD_RULES = ("sorted", "stable")
# a `stable` shard never holds more than CAP_FACTOR * shard_size files
CAP_FACTOR = 4
NAME_DIGITS = 12
GLOB_MAGIC = frozenset("*?[")
# glob patterns, the paths their matches have and the chunk paths made here
# (results/<project>/chunks/<unit>) are POSIX paths
SEP = "/"


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
            names = list(self.shards)
            raise GrumemError(
                f"project {self.project}: no shard {name!r} "
                f"(it has {len(names)}: {names[0]} to {names[-1]})"
            ) from None

    def transcript(self, unit: str) -> str:
        try:
            return self.units[unit]
        except KeyError:
            raise GrumemError(
                f"project {self.project}: no transcript makes the unit {unit!r}"
                + ("" if self.units else " (the project names chunk files, not transcripts)")
            ) from None


def check_shard_size(shard_size: int) -> None:
    if shard_size < 1:
        raise GrumemError(f"shard_size must be at least 1, not {shard_size}")


def shard_names(count: int, shard_size: int) -> list[str]:
    """The names of the shards that `count` units fill, `shard_size` to a shard
    (the `sorted` rule)."""
    check_shard_size(shard_size)
    return [f"s{i:03d}" for i in range(-(-count // shard_size))]


def glob_root(pattern: str) -> str:
    """The directory of a glob pattern before its first wildcard: `t/**/*.jsonl` -> `t`."""
    parts = pattern.split(SEP)
    fixed: list[str] = []
    for part in parts[:-1]:
        if GLOB_MAGIC & set(part):
            break
        fixed.append(part)
    return SEP.join(fixed)


def file_key(path: str, root: str) -> str:
    """What the `stable` rule hashes: the path below the glob's root, so that a
    project moved to another directory keeps its shards.

    Computed on the strings (no working directory is read): every match of a
    glob starts with the pattern's root."""
    if not root:
        return path
    below, top = PurePosixPath(path), PurePosixPath(root)
    if not below.is_relative_to(top):
        raise GrumemError(f"{path}: not below {root}, the root of the glob it matched")
    return str(below.relative_to(top))


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def stable_runs(keys: Sequence[str], shard_size: int) -> list[tuple[int, int]]:
    """[start, end) of each shard of the sorted `keys` under the `stable` rule."""
    check_shard_size(shard_size)
    cap = CAP_FACTOR * shard_size
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(keys)):
        if i - start == cap or int(key_hash(keys[i]), 16) % shard_size == 0:
            runs.append((start, i))
            start = i
    if keys:
        runs.append((start, len(keys)))
    return runs


def stable_shards(
    project: str, keys: Sequence[str], chunks: Sequence[str], shard_size: int
) -> dict[str, tuple[str, ...]]:
    """Shard name -> chunks, for chunks whose sources have the sorted `keys`."""
    shards: dict[str, tuple[str, ...]] = {}
    for start, end in stable_runs(keys, shard_size):
        name = "s" + key_hash(keys[start])[:NAME_DIGITS]
        if name in shards:  # two keys sharing 48 bits of sha256: refuse, never merge
            raise GrumemError(
                f"project {project}: shards starting at {keys[start]!r} and "
                f"{shards[name][0]!r} have one name {name}: rename one of the files"
            )
        shards[name] = tuple(chunks[start:end])
    return shards


def project_shards(
    project: str,
    files: Iterable[str],
    *,
    chunked: bool,
    shard_size: int,
    shard_rule: str = "sorted",
    root: str = "",
) -> ProjectShards:
    """The units and shards of a project's source files (chunk files when
    `chunked`, else transcripts, whose chunk directories live under results/).
    `root` is the glob's fixed directory (glob_root), for the `stable` rule."""
    ordered = sorted(files)
    if chunked:
        units: dict[str, str] = {}
        chunks = tuple(ordered)
    else:
        units = unit_names(project, ordered)
        chunks = tuple(f"results/{project}/chunks/{unit}" for unit in units)
    if shard_rule == "sorted":
        shards = {
            name: chunks[i * shard_size : (i + 1) * shard_size]
            for i, name in enumerate(shard_names(len(chunks), shard_size))
        }
    elif shard_rule == "stable":
        keys = [file_key(f, root) for f in ordered]
        shards = stable_shards(project, keys, chunks, shard_size)
    else:
        raise GrumemError(f"shard_rule must be one of {', '.join(SHARD_RULES)}, not {shard_rule!r}")
    return ProjectShards(
        project=project,
        chunks=chunks,
        units=MappingProxyType(units),
        shards=MappingProxyType(shards),
    )
