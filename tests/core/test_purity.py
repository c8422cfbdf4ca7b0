"""grumem/core is pure: no module of it opens a file, reaches the network, reads the
environment or a cache on disk, or imports what does (its source, read by ast); and
the check refuses each kind of offender planted in a copy of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import grumem.core
from support.purity import package_violations

CORE = Path(grumem.core.__file__).parent


def test_no_module_of_core_touches_a_file_the_network_or_the_environment() -> None:
    modules, found = package_violations(CORE, "grumem.core")
    assert modules > 15
    assert found == [], "grumem/core is not pure:\n" + "\n".join(map(str, found))


PLANTED = [
    ("import os", "imports os (files and environment)"),
    ("import os.path", "imports os.path (files and environment)"),
    ("from pathlib import Path", "imports pathlib (files)"),
    ("import io", "imports io (files)"),
    ("import shutil", "imports shutil (files)"),
    ("import tempfile", "imports tempfile (files)"),
    ("import socket", "imports socket (the network)"),
    ("import subprocess", "imports subprocess (processes)"),
    ("from urllib.request import urlopen", "imports urllib.request (the network)"),
    ("import http.client", "imports http.client (the network)"),
    ("import asyncio", "imports asyncio (the network)"),
    ("from aiohttp import web", "imports aiohttp (the network)"),
    ("import importlib.resources", "imports importlib.resources (package data"),
    ("from importlib import resources", "imports importlib (package data"),
    ("from tiktoken_ext import openai_public", "imports tiktoken_ext (the encoder's files)"),
    ("import tiktoken", "imports tiktoken (the encoder's files)"),
    ("from grumem.io.jsonl import read_jsonl", "imports grumem.io.jsonl, a layer above core"),
    ("import grumem.config.settings", "imports grumem.config.settings, a layer above core"),
    ("from grumem import llm", "imports grumem.llm, a layer above core"),
    ("from ..stages import judge", "imports grumem.stages, a layer above core"),
    ("from .. import io", "imports grumem.io, a layer above core"),
    (
        "if TYPE_CHECKING:\n    from grumem.io.labels import load_labels",
        "imports grumem.io.labels, a layer above core",
    ),
    ("def f():\n    return open('x')", "calls open() (opens a file)"),
    ("def f(o):\n    return o.environ.get('HOME')", "uses .environ (reads the environment)"),
    ("def f():\n    return getenv('HOME')", "calls getenv() (reads the environment)"),
    ("def f(p):\n    return p.read_text()", "calls .read_text() (touches a file)"),
    ("def f(p):\n    p.write_bytes(b'')", "calls .write_bytes() (touches a file)"),
    ("def f():\n    print('x')", "calls print() (writes a stream)"),
]


@pytest.mark.parametrize(("code", "what"), PLANTED, ids=[c for c, _ in PLANTED])
def test_an_offender_planted_in_core_is_named_by_file_and_line(
    tmp_path: Path, code: str, what: str
) -> None:
    core = tmp_path / "core"
    shutil.copytree(CORE, core, ignore=shutil.ignore_patterns("__pycache__"))
    module = core / "tags.py"
    text = module.read_text(encoding="utf-8")
    line = text.count("\n") + 2 + code.count("\n")  # the planted statement's last line
    module.write_text(f"{text}\n{code}\n", encoding="utf-8")
    _, found = package_violations(core, "grumem.core")
    assert len(found) == 1, found
    assert str(found[0]).startswith(f"{module}:{line}: {what}")


ALLOWED = [
    "if TYPE_CHECKING:\n    from os import PathLike",
    "from pathlib import PurePosixPath",
    "from grumem.errors import GrumemError",
    "from grumem.core.json_text import dumps",
    "from . import json_text",
    "import re",
    "def f(s):\n    return s.replace('a', 'b').encode()",
]


@pytest.mark.parametrize("code", ALLOWED)
def test_what_a_pure_module_needs_is_not_refused(tmp_path: Path, code: str) -> None:
    core = tmp_path / "core"
    shutil.copytree(CORE, core, ignore=shutil.ignore_patterns("__pycache__"))
    module = core / "tags.py"
    module.write_text(f"{module.read_text(encoding='utf-8')}\n{code}\n", encoding="utf-8")
    assert package_violations(core, "grumem.core")[1] == []
