"""What a module of grumem/core may not do, read from its source (ast): open a file, reach
the network, read the environment or a cache on disk, or import what does.

A static check: it sees what the source names, not what a value does at run time, so
it refuses the modules and calls a pure function never needs, whatever they are used
for. Imports under `if TYPE_CHECKING:` run never: they may name a stdlib type (an
annotation's `PathLike`), still not a grumem module above core.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# modules whose purpose is a file, a process, the network, the environment or the
# interpreter's import machinery, by what they reach
FORBIDDEN_MODULES = {
    # files and the file system
    "os": "files and environment",
    "io": "files",
    "pathlib": "files",
    "shutil": "files",
    "tempfile": "files",
    "glob": "files",
    "fileinput": "files",
    "mmap": "files",
    "gzip": "files",
    "bz2": "files",
    "lzma": "files",
    "zipfile": "files",
    "tarfile": "files",
    "sqlite3": "files",
    "dbm": "files",
    "shelve": "files",
    # processes, the interpreter, the environment
    "sys": "the interpreter's streams and arguments",
    "subprocess": "processes",
    "multiprocessing": "processes",
    "importlib": "package data and module loading",
    "pkgutil": "package data",
    "builtins": "open and input",
    # the network
    "socket": "the network",
    "ssl": "the network",
    "select": "the network",
    "selectors": "the network",
    "asyncio": "the network",
    "urllib": "the network",
    "http": "the network",
    "ftplib": "the network",
    "smtplib": "the network",
    "aiohttp": "the network",
    "httpx": "the network",
    "requests": "the network",
    "openai": "the network",
    # tiktoken's encodings load (and download) their ranks
    "tiktoken": "the encoder's files",
    "tiktoken_ext": "the encoder's files",
}
# pathlib's pure paths compute on strings and touch no file
ALLOWED_NAMES = {"pathlib": {"PurePath", "PurePosixPath", "PureWindowsPath"}}
# the layers core may import: itself and those below it
ALLOWED_GRUMEM = ("grumem.core", "grumem.records", "grumem.errors")
FORBIDDEN_CALLS = {
    "open": "opens a file",
    "input": "reads the terminal",
    "print": "writes a stream",
    "breakpoint": "stops for the terminal",
    "__import__": "imports by name",
    "exec": "runs text as code",
    "eval": "runs text as code",
    "getenv": "reads the environment",
    "putenv": "writes the environment",
}
FORBIDDEN_ATTRIBUTES = {
    "environ": "reads the environment",
    "environb": "reads the environment",
    "getenv": "reads the environment",
    "putenv": "writes the environment",
}
FORBIDDEN_METHODS = {
    name: "touches a file"
    for name in (
        "read_text",
        "read_bytes",
        "write_text",
        "write_bytes",
        "open",
        "touch",
        "mkdir",
        "unlink",
        "rmdir",
        "iterdir",
        "glob",
        "rglob",
        "exists",
        "is_file",
        "is_dir",
        "stat",
        "chmod",
    )
}


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines of the statements under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def absolute_module(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _grumem_refused(name: str) -> bool:
    return (name == "grumem" or name.startswith("grumem.")) and not any(
        name == a or name.startswith(a + ".") for a in ALLOWED_GRUMEM
    )


def _import_violations(
    node: ast.Import | ast.ImportFrom, package: str, type_only: bool
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        imported = [(a.name, None) for a in node.names]
    else:
        module = absolute_module(node.module, node.level, package)
        # `from grumem import io` imports grumem.io
        imported = [
            (f"{module}.{a.name}" if module == "grumem" else module, a.name) for a in node.names
        ]
    for name, member in imported:
        if _grumem_refused(name):
            yield f"imports {name}, a layer above core"
            continue
        top = name.split(".")[0]
        if top not in FORBIDDEN_MODULES or type_only:
            continue
        if member is not None and member in ALLOWED_NAMES.get(name, set()):
            continue
        yield f"imports {name} ({FORBIDDEN_MODULES[top]})"


def module_violations(path: Path, package: str) -> list[Violation]:
    """What the module at `path` (of `package`, for its relative imports) may not do."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    type_only = _type_checking_lines(tree)
    found: list[Violation] = []
    for node in ast.walk(tree):
        whats: list[str] = []
        if isinstance(node, ast.Import | ast.ImportFrom):
            whats = list(_import_violations(node, package, node.lineno in type_only))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_CALLS
        ):
            whats = [f"calls {node.func.id}() ({FORBIDDEN_CALLS[node.func.id]})"]
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            whats = [f"uses .{node.attr} ({FORBIDDEN_ATTRIBUTES[node.attr]})"]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in FORBIDDEN_METHODS
        ):
            whats = [f"calls .{node.func.attr}() ({FORBIDDEN_METHODS[node.func.attr]})"]
        found += [Violation(path, node.lineno, w) for w in whats]
    # one a statement and kind: `from m import a, b` is one import of m
    return sorted(set(found), key=lambda v: (str(v.path), v.line, v.what))


def package_violations(directory: Path, package: str) -> tuple[int, list[Violation]]:
    """(modules read, their violations) of every module under `directory`."""
    modules = sorted(directory.rglob("*.py"))
    found: list[Violation] = []
    for path in modules:
        # the package a module's relative imports start from: its directory's
        found += module_violations(
            path, ".".join([package, *path.relative_to(directory).parts[:-1]])
        )
    return len(modules), found
