"""What the package and the workflow say stands on its own: no comment, docstring or
message in src/ or the workflow points at a planning card, a milestone, the design
notes or a file outside the repository (a user has none of them), every module path
a text names (`grumem.core.template.fill`) is one the package has, and the workflow
reads no Snakemake internal for its config.

Each check reads the files git tracks as text; a failure names file and line."""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "src" / "grumem"
# what a user of the repository cannot look up
OUTSIDE = {
    r"card \d": "a planning card",
    r"\bM\d\.\d": "a milestone",
    r"DESIGN": "the design notes",
    r"\.\./shared": "a file outside the repository",
    r"issue \d+": "an issue",
}
DOTTED_RE = re.compile(r"\bgrumem(?:\.[A-Za-z_]\w*)+")
# dotted names that are no module path: the entry point group of format plugins
NOT_MODULES = {"grumem.transcript_formats"}
# the packages pyproject ships, grumem.schemas and grumem.templates among them (their
# directories are outside src/)
PACKAGES = set(
    tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "packages"
    ]
)
# the command line's config files, a Snakemake internal; `config` is the public view
SNAKEMAKE_INTERNALS = re.compile(r"\bworkflow\.(overwrite_configfiles|config_settings)\b")


def tracked(*roots: str) -> list[Path]:
    """The text files git tracks under `roots` (of the repository)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *roots],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [REPO_ROOT / name for name in out.split("\0") if name]


def lines(paths: list[Path], root: Path = REPO_ROOT) -> Iterator[tuple[str, int, str]]:
    """(file relative to `root`, line number, line) of each text file."""
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            yield path.relative_to(root).as_posix(), number, line


def outside_references(paths: list[Path], root: Path = REPO_ROOT) -> list[str]:
    """`file:line: what: the line`, once for each kind of reference a line holds."""
    return [
        f"{file}:{n}: {what}: {line.strip()}"
        for file, n, line in lines(paths, root)
        for pattern, what in OUTSIDE.items()
        if re.search(pattern, line)
    ]


@cache
def module_names(path: Path) -> dict[str, set[str]]:
    """A module's top-level names, each with the names its class body defines."""
    names: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {name for n in node.body for name in assigned(n)}
        else:
            for name in assigned(node):
                names.setdefault(name, set())
    return names


def assigned(node: ast.stmt) -> list[str]:
    """The names a statement binds (functions, classes, assignments, imports)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.If | ast.Try):  # names bound under a condition
        children = (c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
        return [name for child in children for name in assigned(child)]
    return []


def resolves(dotted: str) -> bool:
    """Whether `grumem.a.b.Name.attr` names a module of the package, then a name it
    defines, then (for a class) a name its body defines. Read from the source, so a
    module whose imports are not installed here (grumem.verl) is checked too."""
    if dotted in NOT_MODULES or dotted in PACKAGES:
        return True
    parts = dotted.split(".")[1:]
    where = PACKAGE
    while parts and ((where / parts[0]).is_dir() or (where / f"{parts[0]}.py").is_file()):
        if (where / parts[0]).is_dir():
            where = where / parts.pop(0)
        else:
            where = where / f"{parts.pop(0)}.py"
            break
    if not parts:
        return True
    module = where if where.suffix == ".py" else where / "__init__.py"
    if not module.is_file():
        return False
    names = module_names(module)
    if parts[0] not in names:
        return False
    members = names[parts[0]]
    return len(parts) == 1 or not members or parts[1] in members


def stale_module_paths(paths: list[Path]) -> list[str]:
    return [
        f"{file}:{n}: {name} is no module path of the package"
        for file, n, line in lines(paths)
        for name in (m.group(0) for m in DOTTED_RE.finditer(line))
        if not resolves(name)
    ]


def test_nothing_points_outside_the_repository() -> None:
    found = outside_references(tracked("src", "workflow", "Snakefile"))
    assert found == [], "references a user cannot follow:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_reference(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    text = [
        '"""The export (card 004),',
        "done in M5.3,",
        "as DESIGN says;",
        "see ../shared/notes/x.md",
        "and issue 28.",
        'A card, M5, a design, cards 4 and issues are words, not references."""',
    ]
    planted.write_text("\n".join(text) + "\n", encoding="utf-8")
    found = outside_references([planted], tmp_path)
    assert found == [
        f"planted.py:{n}: {what}: {line}"
        for n, (what, line) in enumerate(zip(OUTSIDE.values(), text, strict=False), 1)
    ]


def test_every_module_path_named_is_the_packages() -> None:
    found = stale_module_paths(tracked("src", "workflow", "Snakefile"))
    assert found == [], "names of modules that moved or never were:\n" + "\n".join(found)


def test_module_paths_resolve_from_the_source() -> None:
    assert resolves("grumem.core.template")
    assert resolves("grumem.core.template.fill")
    assert resolves("grumem.core.template.PromptBuilder.split")
    assert resolves("grumem.verl.worker.GrumemAgentLoopManager")  # verl is not imported
    assert resolves("grumem.io.template_files.GRU_MEM_TEMPLATE")
    assert not resolves("grumem.template.PromptBuilder.split")  # before the move into core/
    assert not resolves("grumem.core.template.PromptBuilder.no_such_method")
    assert not resolves("grumem.core.no_such_module")


def test_the_workflow_reads_no_snakemake_internal() -> None:
    found = [
        f"{file}:{n}: {line.strip()}"
        for file, n, line in lines(tracked("Snakefile", "workflow"))
        if SNAKEMAKE_INTERNALS.search(line)
    ]
    assert found == [], "Snakemake internals:\n" + "\n".join(found)
