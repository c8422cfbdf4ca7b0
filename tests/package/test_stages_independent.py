"""No stage imports another: a stage is the I/O shell of one rule, and what two stages
share lives in a layer below them (io/, core/, config/...), where the other rules'
code can reach it without loading a stage."""

from __future__ import annotations

import ast
from pathlib import Path

STAGES = Path(__file__).resolve().parents[2] / "src" / "grumem" / "stages"
PACKAGE = "grumem.stages"


def imported_stages(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, stage module) for every import of a module of grumem.stages in `tree`,
    at any depth (function-level imports too), absolute or relative."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1:
                continue  # above grumem.stages: grumem.<other layer>
            if node.level == 1:  # from . import x, from .x import y: inside grumem.stages
                base = f"{PACKAGE}.{node.module}" if node.module else PACKAGE
            else:
                base = node.module or ""
            if base == PACKAGE:  # from grumem.stages import judge / from . import judge
                found.extend((node.lineno, f"{PACKAGE}.{a.name}") for a in node.names)
            elif base.startswith(PACKAGE + "."):
                found.append((node.lineno, base))
    return found


def stage_imports(stages_dir: Path) -> list[str]:
    """`file:line imports grumem.stages.x` for each stage importing another stage."""
    problems = []
    for path in sorted(stages_dir.glob("*.py")):
        own = f"{PACKAGE}.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in imported_stages(tree):
            stage = ".".join(module.split(".")[:3])
            if stage != own:
                problems.append(f"{path}:{line} imports {module}")
    return problems


def test_no_stage_imports_another_stage() -> None:
    assert STAGES.is_dir()
    problems = stage_imports(STAGES)
    assert not problems, "\n".join(problems)


def test_the_scan_names_file_and_line_of_every_form_of_import(tmp_path: Path) -> None:
    (tmp_path / "judge.py").write_text("from grumem.stages.judge import x\n", encoding="utf-8")
    (tmp_path / "labels.py").write_text(
        "import os\n"
        "from grumem.stages.judge import format_summary\n"
        "import grumem.stages.judge as j\n"
        "from grumem.stages import prompts\n"
        "from . import sessions\n"
        "from .gates import regate\n"
        "from ..io import jsonl\n"
        "def main():\n"
        "    from grumem.stages.export import run\n",
        encoding="utf-8",
    )
    labels = tmp_path / "labels.py"
    assert stage_imports(tmp_path) == [
        f"{labels}:2 imports grumem.stages.judge",
        f"{labels}:3 imports grumem.stages.judge",
        f"{labels}:4 imports grumem.stages.prompts",
        f"{labels}:5 imports grumem.stages.sessions",
        f"{labels}:6 imports grumem.stages.gates",
        f"{labels}:9 imports grumem.stages.export",
    ]
