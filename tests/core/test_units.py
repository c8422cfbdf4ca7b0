"""Unit names (grumem.core.units): the names the workflow makes are the names its
`{unit}` wildcard constraint accepts, and distinct files keep distinct names."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.units import UNIT_PATTERN, unit_name, unit_names
from grumem.errors import GrumemError

# a file name: any characters but the path separator and NUL (surrogates too:
# os.fsdecode yields them for names that are not UTF-8)
file_names = st.text(
    st.characters(blacklist_characters="/\x00", blacklist_categories=()), min_size=1, max_size=40
)


@given(file_names)
def test_every_name_made_matches_the_wildcard_constraint(name: str) -> None:
    unit = unit_name(f"some/dir/{name}")
    assert re.fullmatch(UNIT_PATTERN, unit), (name, unit)


@given(st.lists(file_names, min_size=2, max_size=8, unique=True))
def test_distinct_names_stay_distinct_or_collide_loudly(names: list[str]) -> None:
    paths = [f"d/{n}" for n in names]
    try:
        units = unit_names("p", paths)
    except GrumemError as e:
        # a collision names both files
        assert sum(p in str(e) for p in paths) >= 2
    else:
        assert sorted(units.values()) == sorted(paths)


@given(st.from_regex(UNIT_PATTERN, fullmatch=True))
def test_a_name_the_constraint_accepts_is_kept(name: str) -> None:
    assert unit_name(f"x/{name}") == name


@pytest.mark.parametrize(
    "names",
    [
        ["_draft notes.jsonl", "draft notes.jsonl", "draft_notes.jsonl"],
        ["é-notes.jsonl", "è-notes.jsonl", "_-notes.jsonl"],
        ["会话.jsonl", "会议.jsonl", "__.jsonl"],
    ],
)
def test_names_that_render_alike_stay_distinct(names: list[str]) -> None:
    units = unit_names("p", names)
    assert sorted(units.values()) == sorted(names)
    assert all(re.fullmatch(UNIT_PATTERN, u) for u in units)


def test_two_files_with_one_name_fail_naming_both() -> None:
    with pytest.raises(GrumemError, match=r"a/s\.jsonl and b/s\.jsonl"):
        unit_names("p", ["a/s.jsonl", "b/s.jsonl"])
