"""The LLM judge's settings: `labels.judge` resolved against the `llm` section.

The judge's endpoint, model and sampling may differ from the responses stage's
(`labels.judge`); a null field there takes the `llm` section's value. Sampling
is the judge's own (temperature 0 by default), never the rollout's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grumem.core.grammar import fitting_think_chars, grammar_fields
from grumem.core.template import Budget

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens")


@dataclass(frozen=True)
class JudgeSettings:
    """The judge's endpoint, model, sampling and grammar, resolved against `llm`."""

    model: str
    base_url: str | list[Any] | None
    mode: str
    server_kind: str
    sampling: dict[str, Any]  # temperature, top_p, max_tokens: labels.judge's
    grammar: dict[str, Any]  # the request's grammar field(s); {} without a grammar
    llm: dict[str, Any]  # the llm section with the judge's base_url and model in it
    budget: Budget

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> JudgeSettings:
        """From validated sections (`llm`, `budget`, the project's `labels`); a grammar
        the server kind takes none of is a GrammarUnsupported here, before any request."""
        llm, judge = settings["llm"], settings["labels"]["judge"]

        def pick(key: str) -> Any:
            return llm[key] if judge[key] is None else judge[key]

        model, base_url, server_kind = pick("model"), pick("base_url"), pick("server_kind")
        sampling = {k: judge[k] for k in SAMPLING_KEYS}
        grammar = {}
        if pick("grammar"):
            bound = fitting_think_chars(sampling["max_tokens"])
            grammar = grammar_fields(server_kind, "judge", bound)
        return cls(
            model=model,
            base_url=base_url,
            mode=llm["mode"],
            server_kind=server_kind,
            sampling=sampling,
            grammar=grammar,
            llm={**llm, "base_url": base_url, "model": model},
            budget=Budget.from_config(settings["budget"]),
        )

    @property
    def max_tokens(self) -> int:
        return int(self.sampling["max_tokens"])
