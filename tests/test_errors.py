"""grumem.errors holds every exception of the package, and its docstring draws their
hierarchy as it is: each class once, under its parent, with its other bases named."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import grumem.errors as errors

PACKAGE = Path(errors.__file__).parent
# exceptions that must subclass a dependency's, which errors.py does not import
BESIDE_THEIR_CODE = {"llm/transport.py": {"ResponseTooLarge"}}
# a line of the drawing: its depth (4 characters a level) and the class with its bases
TREE_LINE = re.compile(r"^    ((?:[│ ]   )*)(?:[├└]── )?(\w+)(?: \(([\w, ]+)\))?\s+|^    (\w+)$")


def drawn() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """class -> (its parent in the drawing, the other bases named beside it)."""
    tree: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    parents: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        m = TREE_LINE.match(line)
        if m is None:
            continue
        if m.group(4):  # the root
            tree[m.group(4)] = (None, ())
            parents = [m.group(4)]
            continue
        depth = len(m.group(1)) // 4 + 1
        name, others = m.group(2), tuple(b.strip() for b in (m.group(3) or "").split(",") if b)
        assert name not in tree, f"{name} is drawn twice"
        del parents[depth:]
        tree[name] = (parents[-1], others)
        parents.append(name)
    return tree


def defined() -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """class -> (its base in grumem.errors, its other bases), for every exception there."""
    out: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for name, cls in vars(errors).items():
        if (
            inspect.isclass(cls)
            and issubclass(cls, BaseException)
            and cls.__module__ == errors.__name__
        ):
            own = [b.__name__ for b in cls.__bases__ if b.__module__ == errors.__name__]
            others = tuple(b.__name__ for b in cls.__bases__ if b.__module__ != errors.__name__)
            out[name] = (own[0] if own else None, () if not own else others)
    return out


def test_the_docstring_draws_every_exception_under_its_parent() -> None:
    assert drawn() == defined()


def exception_classes(path: Path) -> list[str]:
    """The classes of a module that derive from an exception, read from its source: a
    base named like one (`…Error`, `…Exception`) or imported from grumem.errors."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    from_errors = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "grumem.errors"
        for alias in node.names
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
            if name in from_errors or re.search(r"(Error|Exception)$", name):
                found.append(node.name)
                break
    return found


def test_every_exception_lives_in_errors() -> None:
    elsewhere = {
        f"{path.relative_to(PACKAGE).as_posix()}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "errors.py"
        for name in exception_classes(path)
        if name not in BESIDE_THEIR_CODE.get(path.relative_to(PACKAGE).as_posix(), set())
    }
    assert elsewhere == set(), "exceptions outside grumem/errors.py"


def test_the_docstring_names_those_beside_their_code() -> None:
    for module, names in BESIDE_THEIR_CODE.items():
        dotted = "grumem." + module.removesuffix(".py").replace("/", ".")
        for name in names:
            assert f"{dotted}.{name}" in (errors.__doc__ or "")
