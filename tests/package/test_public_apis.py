"""The package uses the public API of other packages only: no module of src/ imports an
underscore-prefixed module or name of a third-party package (`from openai._models
import ...`, `import openai._types`, `from pkg import _name`), reaches one through an
imported name (`fastjsonschema._get_code_generator_class(...)`), nor overrides or
calls a private member of a third-party class it subclasses (`def _build_request`,
`super()._build_request(...)`). Such code breaks silently on any upgrade.

The scan reads the AST; the standard library is not third-party, and dunder names
(`__version__`, `__main__`) are not private.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
OWN = {"grumem"}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def third_party(module: str) -> bool:
    top = module.split(".")[0]
    return top not in OWN and top not in sys.stdlib_module_names


def private_part(dotted: str) -> str | None:
    return next((part for part in dotted.split(".")[1:] if private(part)), None)


def dotted_name(node: ast.expr) -> str | None:
    """`a.b.c` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


class Scan(ast.NodeVisitor):
    def __init__(self, where: str):
        self.where = where
        self.found: list[str] = []
        self.imported: dict[str, str] = {}  # a local name -> the third-party dotted name

    def report(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{node.lineno}: {what}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not third_party(alias.name):
                continue
            part = private_part(alias.name)
            if part:
                self.report(node, f"imports {alias.name} (private module {part})")
            local = alias.asname or alias.name.split(".")[0]
            self.imported[local] = alias.name if alias.asname else local

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or not third_party(node.module):
            return
        part = private_part(node.module) or (
            node.module.split(".")[0] if private(node.module.split(".")[0]) else None
        )
        if part:
            self.report(node, f"imports from {node.module} (private module {part})")
        for alias in node.names:
            if private(alias.name):
                self.report(node, f"imports {alias.name} from {node.module} (a private name)")
            self.imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = dotted_name(node)
        if name is not None:
            base = name.split(".")[0]
            if base in self.imported:
                full = self.imported[base] + name[len(base) :]
                part = private_part(full)
                if part:
                    self.report(node, f"uses {full} (private {part})")
                    return  # one report for the whole chain
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = []
        for base in node.bases:
            name = dotted_name(base)
            if name is not None and name.split(".")[0] in self.imported:
                full = self.imported[name.split(".")[0]] + name[len(name.split(".")[0]) :]
                bases.append(resolve(full))
        bases = [b for b in bases if b is not None]
        if bases:
            inherited = {n for b in bases for n in dir(b) if private(n)}
            # the class's own private members: defined or assigned here, none inherited
            own = (
                {
                    target.attr
                    for item in ast.walk(node)
                    if isinstance(item, ast.Assign | ast.AnnAssign | ast.AugAssign)
                    for target in (item.targets if isinstance(item, ast.Assign) else [item.target])
                    if isinstance(target, ast.Attribute) and _is_self_or_super(target.value)
                }
                | {
                    item.name
                    for item in ast.walk(node)
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                }
                | {
                    target.id
                    for item in node.body
                    if isinstance(item, ast.Assign | ast.AnnAssign)
                    for target in (item.targets if isinstance(item, ast.Assign) else [item.target])
                    if isinstance(target, ast.Name)
                }
            )
            own -= inherited
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    if item.name in inherited:
                        self.report(item, f"{node.name} overrides the private {item.name}")
                elif (
                    isinstance(item, ast.Attribute)
                    and private(item.attr)
                    and item.attr not in own
                    and _is_self_or_super(item.value)
                ):
                    self.report(item, f"{node.name} uses the inherited private {item.attr}")
        self.generic_visit(node)


def _is_self_or_super(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def resolve(dotted: str) -> type | None:
    """The class a dotted third-party name is, or None when it is no importable class."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            value = getattr(value, attr, None)
        return value if isinstance(value, type) else None
    return None


def private_uses(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        scan = Scan(str(path.relative_to(root)))
        scan.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found += sorted(scan.found, key=lambda f: int(f.split(":")[1]))
    return found


def test_src_uses_no_private_api_of_another_package() -> None:
    assert private_uses(SRC) == []


OFFENDERS = [
    ("from openai._models import FinalRequestOptions", "imports from openai._models"),
    ("import openai._types", "imports openai._types (private module _types)"),
    ("import openai._vendor.httpx_aiohttp as h", "imports openai._vendor.httpx_aiohttp"),
    ("from fastjsonschema import _get_code_generator_class", "a private name"),
    (
        "import fastjsonschema\nx = fastjsonschema._get_code_generator_class({})",
        "uses fastjsonschema._get_code_generator_class",
    ),
    ("import openai\nm = openai._compat.model_copy", "uses openai._compat.model_copy"),
    (
        "import openai\nclass C(openai.AsyncOpenAI):\n"
        "    def _build_request(self, options):\n        return super()._build_request(options)",
        "C overrides the private _build_request",
    ),
    (
        "from openai import AsyncOpenAI\nclass C(AsyncOpenAI):\n"
        "    def go(self):\n        return self._platform",
        "C uses the inherited private _platform",
    ),
]


@pytest.mark.parametrize(("code", "named"), OFFENDERS)
def test_a_private_use_is_found_naming_file_and_line(tmp_path: Path, code: str, named: str):
    shutil.copytree(
        SRC / "grumem", tmp_path / "grumem", ignore=shutil.ignore_patterns("__pycache__")
    )
    module = tmp_path / "grumem" / "llm" / "client.py"
    lines = module.read_text(encoding="utf-8").count("\n")
    with open(module, "a", encoding="utf-8") as f:
        f.write(f"\n{code}\n")
    found = private_uses(tmp_path)
    assert len(found) >= 1 and all(f.startswith("grumem/llm/client.py:") for f in found), found
    assert any(named in f for f in found), found
    assert all(int(f.split(":")[1]) > lines for f in found), found


def test_own_private_names_and_the_standard_librarys_are_not_reported(tmp_path: Path):
    package = tmp_path / "grumem"
    package.mkdir()
    (package / "m.py").write_text(
        "import os\nfrom grumem.io.jsonl import _generate_code\nimport grumem._x\n"
        "os._exit\nimport openai\nopenai.__version__\nfrom llama_cpp.server.__main__ import main\n",
        encoding="utf-8",
    )
    assert private_uses(tmp_path) == []
