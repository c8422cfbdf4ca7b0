"""The package's layering is a checked contract (pyproject's [tool.importlinter]): one
`layers` contract (cli > stages | tools > report > corpus | verl | llm > config >
transcripts > io > core > records > errors), exhaustive, and the product never
imports test support."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(REPO_ROOT / "pyproject.toml"), "--no-cache"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_contracts() -> None:
    proc = lint_imports(REPO_ROOT / "src")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 2 kept, 0 broken." in proc.stdout


@pytest.mark.parametrize(
    ("module", "line", "found"),
    [
        # a lower layer importing a higher one
        (
            "core/loop.py",
            "from grumem.stages.gates import main",
            "grumem.core.loop -> grumem.stages",
        ),
        ("core/template.py", "import grumem.cli", "grumem.core.template -> grumem.cli"),
        ("core/tags.py", "import grumem.io.jsonl", "grumem.core.tags -> grumem.io.jsonl"),
        ("records/__init__.py", "import grumem.core.loop", "grumem.records -> grumem.core"),
        ("io/jsonl.py", "import grumem.config.settings", "grumem.io.jsonl -> grumem.config"),
        ("errors.py", "import grumem.io.jsonl", "grumem.errors -> grumem.io.jsonl"),
        # siblings on one line never import each other
        ("llm/request.py", "import grumem.stages.judge", "grumem.llm.request -> grumem.stages"),
        ("verl/estimator.py", "import grumem.llm.client", "grumem.verl.estimator -> grumem.llm"),
        (
            "corpus/summary.py",
            "import grumem.verl.turn_overrides",
            "grumem.corpus.summary -> grumem.verl",
        ),
        ("stages/gates.py", "import grumem.tools.prompt", "grumem.stages.gates -> grumem.tools"),
        # the product never imports test support
        ("io/jsonl.py", "from tests.support import fake_server", "never imports test support"),
    ],
)
def test_a_forbidden_import_breaks_the_contract(
    tmp_path: Path, module: str, line: str, found: str
) -> None:
    src = copy_of_the_package(tmp_path)
    with open(src / "grumem" / module, "a", encoding="utf-8") as f:
        f.write(f"\n{line}  # noqa\n")
    proc = lint_imports(src)
    assert proc.returncode != 0
    assert found in proc.stdout.replace("(l.", " (l."), proc.stdout


def test_a_new_module_outside_every_layer_breaks_the_contract(tmp_path: Path) -> None:
    """exhaustive: a module nobody placed in a layer is refused the day it lands."""
    src = copy_of_the_package(tmp_path)
    (src / "grumem" / "helpers.py").write_text("X = 1\n", encoding="utf-8")
    proc = lint_imports(src)
    assert proc.returncode != 0
    assert "not listed as layers" in proc.stdout and "grumem.helpers" in proc.stdout


def copy_of_the_package(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(
        REPO_ROOT / "src" / "grumem", src / "grumem", ignore=shutil.ignore_patterns("__pycache__")
    )
    return src
