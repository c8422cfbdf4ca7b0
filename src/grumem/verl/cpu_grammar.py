"""The gate grammar as a token mask for the embedded rollout server: xgrammar compiles
the workflow's own GBNF (grumem.core.grammar.gbnf, the one llama.cpp and vLLM are
sent) against the policy's tokenizer, and each request walks it with a matcher.

xgrammar over a hand-written mask: it takes the GBNF as it is, keeps a per-token
mask cache (one bitmask fill a step, ~0.1 ms here), and is what vLLM's structured
outputs use, so the embedded server and a vLLM run constrain alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grumem.core.grammar import fitting_text_chars, gbnf

# Tighter than the workflow's 2.5: under the mask a small policy often spells a tag in
# more tokens than its usual tokenization (measured at 48 tokens and 2.5, 2 of 4 demo
# answers were cut inside <update>), so the text slots leave the tags more room
CHARS_PER_TOKEN = 2.0


@dataclass
class XgrammarState:
    matcher: Any
    bitmask: torch.Tensor
    apply: Any

    def mask(self, logits: torch.Tensor) -> None:
        self.matcher.fill_next_token_bitmask(self.bitmask)
        self.apply(logits, self.bitmask)

    def accept(self, token: int) -> None:
        self.matcher.accept_token(token)


class CompiledGrammar:
    """`which` (gate, judge) compiled for `tokenizer`; the text slots bounded so an
    answer fits `max_tokens` (grumem.core.grammar.fitting_text_chars, CHARS_PER_TOKEN)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_id: int, which: str, max_tokens: int):
        import xgrammar as xgr

        self._xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=[stop_id]
        )
        self.text = gbnf(which, fitting_text_chars(max_tokens, CHARS_PER_TOKEN))
        self.compiled = xgr.GrammarCompiler(info).compile_grammar(self.text)
        self.vocab_size = vocab_size

    def state(self) -> XgrammarState:
        xgr = self._xgr
        bitmask = xgr.allocate_token_bitmask(1, self.vocab_size)[0]
        return XgrammarState(xgr.GrammarMatcher(self.compiled), bitmask, _apply(xgr))


def _apply(xgr: Any) -> Any:
    def apply(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        xgr.apply_token_bitmask_inplace(logits, bitmask)

    return apply
