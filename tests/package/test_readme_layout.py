"""The README's Layout section, held to the code: its table has a row per rule of the
workflow with the file it is defined in, the subcommand its shell runs, the stage module
that subcommand's handler lives in and the layers that module imports; its list names
every part of src/grumem/ the layers contract has, and only paths that exist; its
layering line is pyproject's contract."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "src" / "grumem"

RULE_RE = re.compile(r"^(?:rule|checkpoint) (\w+):", re.M)
SUBCOMMAND_RE = re.compile(r"\bgrumem ([a-z][a-z-]*)")
ROW_RE = re.compile(r"^\| `(\w+)` \|(.*)\|$", re.M)
BULLET_RE = re.compile(r"^- `([^`]+)`: (.*?)(?=^- |^\n)", re.M | re.S)


def workflow_rules(repo: Path) -> dict[str, tuple[str, str | None]]:
    """rule -> (file it is defined in, the `grumem` subcommand its shell runs or None)."""
    rules: dict[str, tuple[str, str | None]] = {}
    for path in [repo / "Snakefile", *sorted((repo / "workflow" / "rules").glob("*.smk"))]:
        text = path.read_text(encoding="utf-8")
        for m in RULE_RE.finditer(text):
            # a rule's body ends at the next line that is not indented
            body = re.split(r"^\S", text[m.end() :], maxsplit=1, flags=re.M)[0]
            shell = body.split("shell:", 1)[1] if "shell:" in body else ""
            sub = SUBCOMMAND_RE.search(shell)
            assert m.group(1) not in rules, f"rule {m.group(1)} is defined twice"
            rules[m.group(1)] = (path.relative_to(repo).as_posix(), sub and sub.group(1))
    return rules


def cli_handlers(cli: Path) -> dict[str, str]:
    """subcommand -> the module of its handler, read from cli.py's add_parser and
    set_defaults(handler=...) calls, one pair per function."""
    handlers: dict[str, str] = {}
    for fn in ast.parse(cli.read_text(encoding="utf-8")).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        name = handler = None
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr == "add_parser" and node.args:
                name = ast.literal_eval(node.args[0])
            elif node.func.attr == "set_defaults":
                for kw in node.keywords:
                    if kw.arg == "handler":
                        handler = ast.literal_eval(kw.value).split(":")[0]
        if name is not None and handler is not None:
            handlers[name] = handler
    return handlers


def imported_layers(module: Path) -> list[str]:
    """The parts of grumem (grumem.X) a module imports, at any depth, sorted."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "grumem":
                names = [f"grumem.{a.name}" for a in node.names]
        found.update(n.split(".")[1] for n in names if n.startswith("grumem."))
    return sorted(found)


def contract_layers(repo: Path) -> list[str]:
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [
        c["layers"] for c in pyproject["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    return layers


def layout_section(readme: str) -> str:
    return readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.split("|")]


def table_problems(section: str, repo: Path) -> list[str]:
    rules = workflow_rules(repo)
    handlers = cli_handlers(repo / "src" / "grumem" / "cli.py")
    rows = {m.group(1): cells(m.group(2)) for m in ROW_RE.finditer(section)}
    problems = [f"rule {r} is not in the table" for r in rules if r not in rows]
    problems += [
        f"the table names rule {r}, which the workflow has not" for r in rows - rules.keys()
    ]
    for rule, (file, sub) in rules.items():
        if rule not in rows:
            continue
        if len(rows[rule]) != 4:
            problems.append(f"rule {rule}: the row has {len(rows[rule]) + 1} cells, not 5")
            continue
        defined_in, subcommand, module, layers = rows[rule]
        if defined_in != f"`{file}`":
            problems.append(f"rule {rule}: defined in `{file}`, the table says {defined_in}")
        if sub is None:
            if module or layers:
                problems.append(f"rule {rule} runs no subcommand, the table names {module}")
            continue
        handler = handlers.get(sub)
        if handler is None:
            problems.append(f"rule {rule} runs `grumem {sub}`, which cli.py does not define")
            continue
        path = Path(*handler.split(".")[1:]).with_suffix(".py")
        expected = {
            "subcommand": f"`{sub}`",
            "module": f"`{path.as_posix()}`",
            "layers": ", ".join(f"`{n}`" for n in imported_layers(repo / "src" / "grumem" / path)),
        }
        for what, shown in zip(expected, (subcommand, module, layers), strict=True):
            if shown != expected[what]:
                problems.append(f"rule {rule}: {what} is {expected[what]}, the table says {shown}")
    return problems


def list_problems(section: str, repo: Path) -> list[str]:
    package = repo / "src" / "grumem"
    handlers = cli_handlers(package / "cli.py")
    bullets = {m.group(1): m.group(2) for m in BULLET_RE.finditer(section)}
    problems = [
        f"`{b}` is listed but src/grumem/{b} does not exist"
        for b in bullets
        if not (package / b).exists()
    ]
    layers = contract_layers(repo)
    for name in (n.strip() for line in layers for n in line.split("|")):
        listed = f"{name}.py" if (package / f"{name}.py").exists() else f"{name}/"
        if listed not in bullets:
            problems.append(f"layer {name} of the contract has no entry (`{listed}`)")
    for text in bullets.values():
        for path in re.findall(r"`([\w/]+/[\w.]+\.py|[\w/]+/)`", text):
            # a path is the package's (`io/jsonl.py`) or the checkout's (`workflow/schemas/`)
            if not ((package / path).exists() or (repo / path).exists()):
                problems.append(f"the list names `{path}`, which src/grumem/ has not")
    tools = bullets.get("tools/", "")
    for sub, module in handlers.items():
        if module.startswith("grumem.tools.") and f"`{sub}`" not in tools:
            problems.append(f"`grumem {sub}` ({module}) is not in the tools/ entry")
    line = " > ".join(f"`{layer}`" for layer in layers)
    if line not in section:
        problems.append(f"the layering line is not pyproject's contract: {line}")
    return problems


def layout_problems(readme: str, repo: Path) -> list[str]:
    section = layout_section(readme)
    return table_problems(section, repo) + list_problems(section, repo)


README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readmes_layout_is_the_codes() -> None:
    assert layout_problems(README, REPO_ROOT) == []


def test_every_rule_and_every_stage_module_has_a_row() -> None:
    """The parsers read what the workflow and cli.py hold: every stage module is the
    handler of a rule's subcommand, so a stage cannot hide from the table."""
    rules = workflow_rules(REPO_ROOT)
    handlers = cli_handlers(PACKAGE / "cli.py")
    assert {"export", "all", "export_project", "report_plots"} <= rules.keys()
    assert rules["export_project"] == ("workflow/rules/export.smk", "export")
    assert rules["export"] == ("Snakefile", None)
    ran = {handlers[sub] for _, sub in rules.values() if sub is not None}
    stages = {f"grumem.stages.{p.stem}" for p in (PACKAGE / "stages").glob("[!_]*.py")}
    assert ran == stages


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "| `gates` | `workflow/rules/gates.smk` | `gates` | `stages/gates.py` |"
            " `config`, `core`, `errors`, `io`, `records` |\n",
            "",
            "rule gates is not in the table",
        ),
        (
            "| `chunk` | `workflow/rules/chunk.smk` |",
            "| `chunks` | `workflow/rules/chunk.smk` |",
            "the table names rule chunks, which the workflow has not",
        ),
        (
            "`report-plots` | `stages/report_plots.py` | `errors`, `io`, `report` |",
            "`report-plots` | `stages/report_plots.py` | `io`, `report` |",
            "rule report_plots: layers is `errors`, `io`, `report`, the table says `io`, `report`",
        ),
        (
            "| `export_project` | `workflow/rules/export.smk` | `export` |",
            "| `export_project` | `workflow/rules/export.smk` | `export-project` |",
            "rule export_project: subcommand is `export`, the table says `export-project`",
        ),
        (
            "`stages/kappa.py`",
            "`core/kappa.py`",
            "rule kappa: module is `stages/kappa.py`, the table says `core/kappa.py`",
        ),
        (
            "| `labels` | `workflow/rules/labels.smk` |",
            "| `labels` | `workflow/rules/judge.smk` |",
            "rule labels: defined in `workflow/rules/labels.smk`, the table says"
            " `workflow/rules/judge.smk`",
        ),
        ("- `verl/`:", "- `training/`:", "`training/` is listed but src/grumem/training/"),
        ("- `verl/`:", "- `verl`:", "layer verl of the contract has no entry (`verl/`)"),
        (
            "(`config/sections.py`)",
            "(`config/queries.py`)",
            "the list names `config/queries.py`, which src/grumem/ has not",
        ),
        ("`calibrate-finalize`, ", "", "`grumem calibrate-finalize` (grumem.tools.calibrate)"),
        ("`config` > `transcripts`", "`transcripts` > `config`", "the layering line is not"),
    ],
)
def test_a_readme_that_drifts_from_the_code_is_named(old: str, new: str, problem: str) -> None:
    assert README.count(old) == 1, old
    problems = layout_problems(README.replace(old, new), REPO_ROOT)
    assert any(p.startswith(problem) for p in problems), problems
