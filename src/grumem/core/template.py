"""The GRU-Mem prompt: the paper's Figure 10a template, filled in one pass.

`templates/gru-mem.txt` holds it byte for byte (grumem.io.template_files reads
it), with no trailing newline, so the user message ends with `</section>`
exactly (tests/core/test_template.py holds the rendered prompt to golden files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from grumem.core.tokens import Tokens
from grumem.errors import BudgetError, TemplateError

# The paper's own case studies show this exact string at t=1. An empty
# <memory></memory> would tell the model "memory exists and is empty".
NO_PREVIOUS_MEMORY = "No previous memory"

SLOTS = ("prompt", "memory", "chunk")
_SLOT_RE = re.compile(r"\{(prompt|memory|chunk)\}")


@dataclass(frozen=True)
class Budget:
    """Token limits (cl100k) of each part of the prompt and of the answer, against the
    context window."""

    context: int = 32768
    question: int = 512
    memory: int = 1024
    section: int = 5000
    response: int = 2048

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> Budget:
        return cls(**(cfg or {}))


def check_slots(text: str, where: str, slots: tuple[str, ...] = SLOTS) -> str:
    """`text` once it has each of `slots` exactly once; a TemplateError naming `where`."""
    for slot in slots:
        n = text.count("{" + slot + "}")
        if n != 1:
            raise TemplateError(f"{where}: slot {{{slot}}} appears {n} times, expected once")
    return text


def fill(template: str, values: dict[str, str]) -> str:
    """Substitute every slot in one pass: text inside a value is never re-scanned,
    so a question holding `{chunk}` or a chunk holding `{memory}` stays literal."""
    return _SLOT_RE.sub(lambda m: values[m.group(1)], template)


def memory_text(memory: str | None) -> str:
    return NO_PREVIOUS_MEMORY if memory is None else memory


@dataclass(frozen=True)
class Prompt:
    system: str | None
    user: str
    tokens: dict[str, int] = field(default_factory=dict)

    def messages(self) -> list[dict[str, str]]:
        msgs = [] if self.system is None else [{"role": "system", "content": self.system}]
        msgs.append({"role": "user", "content": self.user})
        return msgs


@dataclass(frozen=True)
class PromptBuilder:
    """Builds `(system, user)` for one turn and checks the budget before anything is sent;
    `tokens` counts (grumem.io.template_files.load_prompt_builder reads a template file)."""

    template: str
    system: str | None = None
    budget: Budget = Budget()
    tokens: Tokens = field(kw_only=True, compare=False)

    def split(self, question: str, section: str) -> tuple[str, str]:
        """The user message around the memory slot: user = prefix + memory + suffix.

        The prompts stage records this pair so the loop fills only the memory,
        without a second substitution pass over question or section text."""
        head, _, tail = self.template.partition("{memory}")
        values = {"prompt": question, "chunk": section}
        # each slot occurs once, so filling the halves equals filling the whole
        prefix, suffix = fill(head, values), fill(tail, values)
        return prefix, suffix

    def build(
        self, question: str, section: str, memory: str | None, max_tokens: int | None = None
    ) -> Prompt:
        """Render one turn; raise BudgetError naming the component that overflows."""
        user = fill(
            self.template, {"prompt": question, "memory": memory_text(memory), "chunk": section}
        )
        tokens = self.count(question, section, memory)
        self.check(tokens, max_tokens)
        return Prompt(self.system, user, tokens)

    def count(self, question: str, section: str, memory: str | None) -> dict[str, int]:
        # user = the template filled around the section: the section and the whole are
        # counted together (count_within), the parts that repeat once per job
        head, _, tail = self.template.partition("{chunk}")
        values = {"prompt": question, "memory": memory_text(memory)}
        section_tokens, user_tokens = self.tokens.count_within(
            fill(head, values), section, fill(tail, values)
        )
        cached = self.tokens.count_cached
        system = cached(self.system) if self.system else 0
        return {
            "question": cached(question),
            "memory": cached(memory_text(memory)),
            "section": section_tokens,
            "system": system,
            "total": user_tokens + system,
        }

    def check(self, tokens: dict[str, int], max_tokens: int | None = None) -> None:
        check_budget(self.budget, tokens, max_tokens)


def check_budget(b: Budget, tokens: dict[str, int], max_tokens: int | None = None) -> None:
    """Raise BudgetError naming the component that does not fit; never truncate."""
    for component in ("question", "memory", "section"):
        limit = getattr(b, component)
        if tokens.get(component, 0) > limit:
            raise BudgetError(component, tokens[component], limit)
    response = b.response if max_tokens is None else max_tokens
    if response > b.response:
        raise BudgetError(
            "response", response, b.response, "max_tokens exceeds the response budget"
        )
    if tokens["total"] + response > b.context:
        # every component is within its own cap, yet the sum is not: the
        # caps themselves are configured too large; blame the biggest part
        worst = max(("question", "memory", "section"), key=lambda c: tokens.get(c, 0))
        raise BudgetError(
            worst,
            tokens[worst],
            b.context - response - (tokens["total"] - tokens[worst]),
            f"prompt {tokens['total']} + response {response} > context {b.context}",
        )
