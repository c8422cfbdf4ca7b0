"""Who runs the GRU-Mem turn order, read from the source (ast): the modules that drive
grumem.core.turn_loop.TurnLoop, and any module of stages/ or verl/ that does a part
of a turn itself (fills the template, parses an answer, applies the memory or exit
rule, checks a turn's budget) instead of leaving it to the loop.

A static check: it sees the calls the source names (a function imported from the
modules below, called by its name or through its module; a PromptBuilder's methods
called on a name bound to one), not what a value does at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.purity import absolute_module

TURN_LOOP = ("grumem.core.turn_loop", "TurnLoop")

# what a turn is made of, by module: calling one of these is doing a part of a turn
PARTS = {
    "grumem.core.template": {"fill", "PromptBuilder", "check_budget"},
    "grumem.io.template_files": {"load_prompt_builder"},
    "grumem.core.gate_parser": {"parse_gate_response"},
    "grumem.core.tags": {"tag_text", "think_block", "enum_value"},
    "grumem.core.loop": {
        "interpret",
        "interpret_content",
        "memory_after",
        "stops",
        "ask_seed",
        "user_message",
    },
    "grumem.core.turn_loop": {"check_turn_budget", "turn_tokens"},
}
# calls that give a PromptBuilder, and its methods that fill or count the template
BUILDERS = {"PromptBuilder", "load_prompt_builder", "row_prompt_builder", "rollout_builder"}
BUILDER_METHODS = {"split", "build", "count", "check"}

# the modules of stages/ and verl/ that may call a part of a turn themselves, and why
ALLOWED = {
    # the prompt records: the template split around the memory slot once, before any
    # request is paid for; the loop fills the slot
    "stages/prompts.py": {"PromptBuilder", "load_prompt_builder", "build", "split", "check"},
    # the offline re-read of a recording: each recorded ask parsed again and the
    # memory chain recomputed, to check the recorded requests against it
    "stages/gates.py": {"interpret", "memory_after", "user_message"},
    # the judge's own template and budget (its prompt, not the loop's)
    "stages/judge.py": {"fill", "check_budget"},
    # the turn-level reward: one new answer to a recorded turn, read as the loop reads
    # an answer; the turn around it is the recording's
    "verl/reward.py": {"interpret_content"},
}


@dataclass(frozen=True)
class Call:
    path: Path
    line: int
    name: str  # what is called: a function's name, or a builder method's

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: calls {self.name}() itself"


def _bindings(tree: ast.Module, package: str) -> tuple[dict[str, str], dict[str, str]]:
    """(local name -> module of a part imported by name, alias -> module imported whole)."""
    names: dict[str, str] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = absolute_module(node.module, node.level, package)
            for a in node.names:
                if module in PARTS and a.name in PARTS[module] | {TURN_LOOP[1]}:
                    names[a.asname or a.name] = module
                elif f"{module}.{a.name}" in PARTS:  # from grumem.core import loop
                    modules[a.asname or a.name] = f"{module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in PARTS:
                    modules[a.asname or a.name] = a.name
    return names, modules


def _builder_names(tree: ast.Module) -> set[str]:
    """Names (and self attributes) bound to a PromptBuilder: assigned from a call that
    gives one, or a parameter annotated as one."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            if _called_name(node.value) in BUILDERS:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound |= {n for t in targets if (n := _target_name(t))}
        elif (
            isinstance(node, ast.arg)
            and node.annotation is not None
            and "PromptBuilder" in ast.unparse(node.annotation)
        ):
            bound.add(node.arg)
    return bound


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr  # self.builder
    return None


def module_calls(path: Path, package: str) -> Iterator[Call]:
    """The parts of a turn (and TurnLoop) the module at `path` calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names, modules = _bindings(tree, package)
    builders = _builder_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in names:
            yield Call(path, node.lineno, f.id)
        elif isinstance(f, ast.Attribute):
            owner = f.value
            if isinstance(owner, ast.Name) and owner.id in modules:
                if f.attr in PARTS[modules[owner.id]] | {TURN_LOOP[1]}:
                    yield Call(path, node.lineno, f.attr)
            elif f.attr in BUILDER_METHODS and _target_name(owner) in builders:
                yield Call(path, node.lineno, f.attr)


def package_calls(src: Path) -> dict[str, list[Call]]:
    """Per module of stages/ and verl/ (its path under `src`/grumem), what it calls."""
    root = src / "grumem"
    out: dict[str, list[Call]] = {}
    for folder in ("stages", "verl"):
        for path in sorted((root / folder).glob("*.py")):
            key = path.relative_to(root).as_posix()
            out[key] = list(module_calls(path, f"grumem.{folder}"))
    return out


def drivers(calls: dict[str, list[Call]]) -> list[str]:
    """The modules that drive the turn order (call TurnLoop)."""
    return sorted(m for m, cs in calls.items() if any(c.name == TURN_LOOP[1] for c in cs))


def copies(calls: dict[str, list[Call]]) -> list[Call]:
    """Every call of a part of a turn outside the loop that ALLOWED does not excuse."""
    return [
        c
        for m, cs in calls.items()
        for c in cs
        if c.name != TURN_LOOP[1] and c.name not in ALLOWED.get(m, set())
    ]
