"""One turn of the GRU-Mem loop over a sessions row, without verl: the prompt, and
what an answer does to the gates and the memory.

Every rule is the workflow's own: the user message is the prompts stage's
split (grumem.template.PromptBuilder.split) filled by the responses stage's
grumem.loop.user_message, so it is byte for byte what the workflow would send
for that memory; the budget is PromptBuilder's check (an error naming the
component, never a truncation); the answer is read by grumem.core.loop's
interpret_content (the strict gate parser; an over-long candidate is the
turn's format failure), the memory by memory_after and the stop by stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grumem.core.json_text import sha256_text
from grumem.core.loop import PromptHalves, interpret_content, memory_after, stops, user_message
from grumem.core.template import PromptBuilder
from grumem.core.tokens import Tokens
from grumem.errors import BudgetError, GrumemError
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.io.tokenizer import cl100k_tokens
from grumem.verl.session_row import SessionChunk, SessionRow


class TurnBudgetError(GrumemError, ValueError):
    """A turn's prompt does not fit: names the component, the turn and the row."""

    def __init__(self, message: str, component: str):
        self.component = component
        super().__init__(message)


@dataclass(frozen=True)
class TurnPrompt:
    t: int
    messages: list[dict[str, str]]
    tokens: dict[str, int]  # the budget's counts (cl100k), as PromptBuilder counts them


@dataclass(frozen=True)
class Turn:
    """One answered turn: its gates as grumem.core.loop reads them, and the memory after."""

    chunk: SessionChunk
    memory_before: str | None
    gate: dict  # grumem.loop.interpret_content's fields
    memory_after: str | None
    stops: bool
    memory_tokens: int  # memory_tokens(memory_after)

    def fields(self) -> dict:
        """The turn as verl's extra_fields carry it (plain values only)."""
        error = self.gate["parse_error"]
        return {
            "t": self.chunk.t,
            "chunk_sha": self.chunk.chunk_sha,
            "label": self.chunk.evidence,
            "parsed": self.gate["parsed"],
            "update_gate": self.gate["update_gate"],
            "exit_gate": self.gate["exit_gate"],
            "parse_error": None if error is None else error["tag"],
            "memory_tokens": self.memory_tokens,
        }


def prompt_builder(
    row: SessionRow, template: str | Path = GRU_MEM_TEMPLATE, tokens: Tokens | None = None
) -> PromptBuilder:
    """The row's PromptBuilder, counting with `tokens` (the loop's counter, else one of
    its own); the template must be the one the row was exported with."""
    text = load_template(template)
    sha = sha256_text(text)
    if sha != row.template_sha256:
        raise GrumemError(
            f"{row.where}: exported with template sha256 {row.template_sha256[:12]}…, but the"
            f" agent loop's template {template} is {sha[:12]}…: give the loop the template the"
            " prompts stage used (`template:` in rollout.agent.agent_loop_config_path)"
        )
    return PromptBuilder(text, row.system, row.budget, tokens=tokens or cl100k_tokens())


def turn_prompt(
    builder: PromptBuilder, row: SessionRow, chunk: SessionChunk, memory: str | None
) -> TurnPrompt:
    """The chat messages of turn t with M_{t-1} = `memory`, within the budget."""
    prefix, suffix = builder.split(row.question, chunk.text)
    user = user_message(PromptHalves(prefix, suffix), memory)
    tokens = builder.count(row.question, chunk.text, memory)
    try:
        builder.check(tokens)
    except BudgetError as e:
        raise TurnBudgetError(f"{row.where}, turn t={chunk.t}: {e}", e.component) from None
    messages = [] if row.system is None else [{"role": "system", "content": row.system}]
    messages.append({"role": "user", "content": user})
    return TurnPrompt(chunk.t, messages, tokens)


def answer_turn(
    row: SessionRow, chunk: SessionChunk, memory: str | None, text: str, tokens: Tokens
) -> Turn:
    """What the answer `text` to turn t (memory before: `memory`) does; `tokens` counts
    the candidate memory against the budget."""
    gate = interpret_content(text, None, row.budget.memory, tokens)
    after = memory_after(memory, gate)
    return Turn(chunk, memory, gate, after, stops(row.level, gate), memory_tokens(after, tokens))


def memory_tokens(memory: str | None, tokens: Tokens) -> int:
    """The memory's size in the budget's tokens; 0 while none has been written."""
    return 0 if memory is None else tokens.count_cached(memory)
