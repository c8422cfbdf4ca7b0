"""The train / val / test split: each session goes to one split by a seeded hash of
its id, so every chunk, query and trajectory of a session lands in the same split
(no session leaks between training and test).

A session's split depends on its id and the seed alone: adding sessions to a
project never moves another, and every machine assigns the same. The hash is
sha256 of `"{seed}:{session}"`, its first 8 bytes read as a fraction u in [0, 1);
u below `train` is train, below `train + val` is val, else test.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from grumem.errors import SplitError
from grumem.records.base import SplitName

__all__ = ["SPLITS", "SPLIT_METADATA", "Split", "SplitName", "split_file", "split_fraction"]

SPLITS: tuple[SplitName, ...] = ("train", "val", "test")
# the key of a split file's parquet metadata: its project, split, fractions and seed
# (JSON), which name an empty split where no row can
SPLIT_METADATA = b"grumem:split"
# fractions are written in decimal (0.7 + 0.2 + 0.1 is 0.9999999999999999 in floats)
_SUM_TOLERANCE = 1e-9


def split_file(name: str, split: SplitName) -> str:
    """The file of one split beside the file of all rows: sessions.parquet ->
    sessions-train.parquet. Per split, because verl reads whole files (data.train_files,
    data.val_files) and filters no column."""
    stem, dot, ext = name.rpartition(".")
    return f"{stem}-{split}.{ext}" if dot else f"{name}-{split}"


def split_fraction(seed: int, session: str) -> float:
    """u in [0, 1): the session's place on the unit interval under `seed`."""
    digest = hashlib.sha256(f"{seed}:{session}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Split:
    """The fractions of sessions that go to train, val and test, and the hash's seed."""

    train: float = 0.8
    val: float = 0.1
    test: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in SPLITS:
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise SplitError(name, f"is {value}: a fraction is between 0 and 1")
        total = self.train + self.val + self.test
        if not math.isclose(total, 1, rel_tol=0, abs_tol=_SUM_TOLERANCE):
            raise SplitError(
                None,
                f"the fractions train {self.train:g} + val {self.val:g} + test {self.test:g}"
                f" sum to {total:g}, not 1: change them so that they do",
            )

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Split:
        """From a validated `split:` section (its defaults filled)."""
        return cls(
            float(section["train"]),
            float(section["val"]),
            float(section["test"]),
            int(section["seed"]),
        )

    def of(self, session: str) -> SplitName:
        """The split of `session` (its id as the chunk records name it)."""
        u = split_fraction(self.seed, session)
        if u < self.train:
            return "train"
        if u < self.train + self.val:
            return "val"
        return "test"

    def assign(self, sessions: Iterable[str]) -> dict[str, SplitName]:
        """session -> split, for each of `sessions`."""
        return {s: self.of(s) for s in sessions}

    def metadata(self, project: str | None, split: SplitName) -> dict[bytes, bytes]:
        """The parquet metadata of `project`'s file of `split` (SPLIT_METADATA)."""
        fields = {"project": project, "split": split, "train": self.train, "val": self.val}
        fields |= {"test": self.test, "seed": self.seed}
        return {SPLIT_METADATA: json.dumps(fields, sort_keys=True).encode()}

    def describe(self) -> str:
        """The fractions and seed as a message shows them."""
        return f"train {self.train:g} / val {self.val:g} / test {self.test:g}, seed {self.seed}"
