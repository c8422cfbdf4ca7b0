"""One definition of the GRU-Mem turn order: the `responses` stage and verl's agent
loop both drive grumem.core.turn_loop.TurnLoop, and no other module of stages/ or
verl/ fills the template, parses an answer or applies the loop's rules itself (read
from the source, tests/support/one_loop.py); a copy planted in either is named.

What the loop does is held by tests/core/test_turn_loop.py, and that the stage's
recording is the loop's by tests/stages/test_stage_responses.py (recorded answers
in, recorded requests out) and tests/verl/test_verl_online.py (the agent loop fed
the demo's recorded answers rebuilds its recorded messages)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.one_loop import copies, drivers, package_calls

SRC = Path(__file__).resolve().parents[2] / "src"
DRIVERS = ["stages/responses.py", "verl/agent_loop.py"]


def test_the_stage_and_the_agent_loop_drive_the_one_turn_loop() -> None:
    calls = package_calls(SRC)
    assert len(calls) > 20  # every module of stages/ and verl/ was read
    assert drivers(calls) == DRIVERS


def test_no_other_module_does_a_part_of_a_turn_itself() -> None:
    found = copies(package_calls(SRC))
    assert found == [], "a part of the turn order outside grumem.core.turn_loop:\n" + "\n".join(
        map(str, found)
    )


@pytest.fixture
def src(tmp_path: Path) -> Path:
    for folder in ("stages", "verl"):
        shutil.copytree(SRC / "grumem" / folder, tmp_path / "grumem" / folder)
    return tmp_path


PLANTED = [
    (
        "verl/group_step.py",
        "from grumem.core.loop import memory_after\n\ndef f(m, g):\n    return memory_after(m, g)",
        "memory_after",
    ),
    (
        "stages/export.py",
        "import grumem.core.gate_parser as gp\n\ndef f(t):\n    return gp.parse_gate_response(t)",
        "parse_gate_response",
    ),
    (
        "verl/rollout.py",
        "def f(builder: PromptBuilder, q, s):\n    return builder.split(q, s)",
        "split",
    ),
    (
        "stages/responses.py",
        "from grumem.core import loop as r\n\ndef f(level, g):\n    return r.stops(level, g)",
        "stops",
    ),
    (
        "verl/agent_loop.py",
        "def f(row):\n    b = rollout_builder(row, 't', None)\n    return b.build('q', 's', None)",
        "build",
    ),
    (
        "stages/judge.py",
        "from grumem.core.loop import interpret_content as read\n\ndef f(t):\n    return read(t)",
        "read",
    ),
]


@pytest.mark.parametrize(("module", "code", "name"), PLANTED, ids=[p[2] for p in PLANTED])
def test_a_planted_copy_is_named_by_file_and_line(src: Path, module: str, code: str, name: str):
    path = src / "grumem" / module
    text = path.read_text(encoding="utf-8")
    path.write_text(f"{text}\n{code}\n", encoding="utf-8")
    line = text.count("\n") + 2 + code.count("\n")  # the planted code's last line
    found = copies(package_calls(src))
    assert [str(c) for c in found] == [f"{path}:{line}: calls {name}() itself"]


def test_a_driver_that_stops_calling_the_loop_is_missed(src: Path) -> None:
    path = src / "grumem" / "stages" / "responses.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("TurnLoop(", "list("), encoding="utf-8")
    assert drivers(package_calls(src)) == ["verl/agent_loop.py"]
