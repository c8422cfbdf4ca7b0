"""The package's layering is a checked contract (pyproject's [tool.importlinter]): the
product never imports test support, pure modules never import a stage, the LLM
client, a tool or the CLI, and llm/ never imports a stage."""

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
    assert "Contracts: 4 kept, 0 broken." in proc.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("loop.py", "from grumem.stages.gates import regate", "pure modules never import"),
        ("template.py", "import grumem.cli", "pure modules never import"),
        ("llm/request.py", "import grumem.stages.judge", "llm never imports a stage"),
        ("jsonl.py", "from tests.support import fake_server", "never imports test support"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        REPO_ROOT / "src" / "grumem", src / "grumem", ignore=shutil.ignore_patterns("__pycache__")
    )
    with open(src / "grumem" / module, "a", encoding="utf-8") as f:
        f.write(f"\n{line}  # noqa\n")
    proc = lint_imports(src)
    assert proc.returncode != 0
    assert f"{broken}" in proc.stdout
    assert next(ln for ln in proc.stdout.splitlines() if broken in ln).endswith("BROKEN")
