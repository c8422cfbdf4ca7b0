"""The GRU-Mem prompt (card 003): the paper's Figure 10a template, filled in one pass.

`templates/gru-mem.txt` is the card's block byte for byte. One deviation from
the card's fenced block: the file has no trailing newline, so the user
message ends with `</section>` exactly (the newline in the card is the end of
the code fence's last line, not part of the prompt).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from grumem.core.tokens import count_tokens_cached, count_tokens_within
from grumem.errors import BudgetError, TemplateError
from grumem.io.paths import TEMPLATES_DIR

DEFAULT_TEMPLATE = TEMPLATES_DIR / "gru-mem.txt"

# The paper's own case studies show this exact string at t=1. An empty
# <memory></memory> would tell the model "memory exists and is empty".
NO_PREVIOUS_MEMORY = "No previous memory"

SLOTS = ("prompt", "memory", "chunk")
_SLOT_RE = re.compile(r"\{(prompt|memory|chunk)\}")


@dataclass(frozen=True)
class Budget:
    """Token limits (cl100k) against the context window; card 003's table."""

    context: int = 32768
    question: int = 512
    memory: int = 1024
    section: int = 5000
    response: int = 2048

    @classmethod
    def from_config(cls, cfg: dict | None) -> Budget:
        return cls(**(cfg or {}))


def load_template(
    path: str | os.PathLike[str] = DEFAULT_TEMPLATE, slots: tuple[str, ...] = SLOTS
) -> str:
    """Read a template and check it has each of `slots` exactly once."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise TemplateError(f"{path}: is a directory, not a template file") from None
    except OSError as e:
        raise TemplateError(f"{path}: cannot read the template: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TemplateError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    for slot in slots:
        n = text.count("{" + slot + "}")
        if n != 1:
            raise TemplateError(f"{path}: slot {{{slot}}} appears {n} times, expected once")
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
    """Builds `(system, user)` for one turn and checks the budget before anything is sent."""

    template: str
    system: str | None = None
    budget: Budget = Budget()

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str] = DEFAULT_TEMPLATE,
        system: str | None = None,
        budget: Budget | None = None,
    ) -> PromptBuilder:
        return cls(load_template(path), system, budget or Budget())

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
        # counted together (count_tokens_within), the parts that repeat once per run
        head, _, tail = self.template.partition("{chunk}")
        values = {"prompt": question, "memory": memory_text(memory)}
        section_tokens, user_tokens = count_tokens_within(
            fill(head, values), section, fill(tail, values)
        )
        system = count_tokens_cached(self.system) if self.system else 0
        return {
            "question": count_tokens_cached(question),
            "memory": count_tokens_cached(memory_text(memory)),
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
