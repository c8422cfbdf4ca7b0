"""Batched token generation on the CPU with transformers, for the embedded rollout
server (grumem.verl.cpu_rollout): token ids in, token ids and their log-probs out.

One batch runs every request given, left-padded, with one KV cache: a prefill,
then one forward a new token for all rows until each has stopped (its model's end
token, or its max_tokens). A row is sampled with its own temperature, top-k and
top-p, and, when the server constrains answers, under its own grammar matcher.

The log-prob of a sampled token is log_softmax(logits / temperature) at that
token, before top-k, top-p or a grammar mask: what verl's actor computes for the
same token from the same weights (its old log-prob), so the trainer's
`rollout_probs_diff` measures only numerics, and PPO's ratio stays the policy's.
A grammar changes which tokens are drawn, not the probability the policy gives
them (see docs/verl.md, "The embedded backend").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

GREEDY_BELOW = 1e-5  # a temperature below this is greedy decoding, as vLLM's


@dataclass
class Request:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    grammar: GrammarState | None = None
    token_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    done: bool = False


class GrammarState(Protocol):
    """One request's place in its grammar (grumem.verl.cpu_grammar)."""

    def mask(self, logits: torch.Tensor) -> None:
        """Set the logits of every token the grammar forbids next to -inf, in place."""

    def accept(self, token: int) -> None:
        """Advance past `token`."""


def generate(
    model: Any,
    requests: Sequence[Request],
    stop_ids: frozenset[int],
    pad_id: int,
    generator: torch.Generator,
) -> None:
    """Fill each request's token_ids and log_probs (in place)."""
    if not requests:
        return
    with torch.inference_mode():
        ids, mask = _left_padded([r.prompt_ids for r in requests], pad_id)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        # logits of the last position only: the prompt's others are never read
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
        )
        past, logits = out.past_key_values, out.logits[:, -1, :].float()
        last = positions[:, -1]
        while True:
            tokens = _step(requests, logits, stop_ids, generator)
            if all(r.done for r in requests):
                return
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
            last = last + 1
            out = model(
                input_ids=tokens[:, None],
                attention_mask=mask,
                position_ids=last[:, None],
                past_key_values=past,
                use_cache=True,
            )
            past, logits = out.past_key_values, out.logits[:, -1, :].float()


def _left_padded(prompts: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return ids, mask


def _step(
    requests: Sequence[Request],
    logits: torch.Tensor,
    stop_ids: frozenset[int],
    generator: torch.Generator,
) -> torch.Tensor:
    """Draw one token a row; finished rows get their last token again (ignored)."""
    tokens = torch.empty(len(requests), dtype=torch.long)
    for i, r in enumerate(requests):
        if r.done:
            tokens[i] = r.token_ids[-1]
            continue
        greedy = r.temperature < GREEDY_BELOW
        scaled = logits[i] if greedy else logits[i] / r.temperature
        log_probs = torch.log_softmax(scaled, dim=-1)
        token = _draw(r, scaled.clone(), greedy, generator)
        r.token_ids.append(token)
        r.log_probs.append(float(log_probs[token]))
        if r.grammar is not None:
            r.grammar.accept(token)
        r.done = token in stop_ids or len(r.token_ids) >= r.max_tokens
        tokens[i] = token
    return tokens


def _draw(r: Request, scaled: torch.Tensor, greedy: bool, generator: torch.Generator) -> int:
    if r.grammar is not None:
        r.grammar.mask(scaled)
    if greedy:
        return int(scaled.argmax())
    scaled = _top_k(_top_p(scaled, r.top_p), r.top_k)
    probs = torch.softmax(scaled, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def _top_k(scaled: torch.Tensor, k: int) -> torch.Tensor:
    if k is None or k <= 0 or k >= scaled.numel():
        return scaled
    kth = torch.topk(scaled, k).values[-1]
    return scaled.masked_fill(scaled < kth, float("-inf"))


def _top_p(scaled: torch.Tensor, p: float) -> torch.Tensor:
    if p is None or p >= 1.0:
        return scaled
    values, order = torch.sort(scaled, descending=True)
    cumulative = torch.softmax(values, dim=-1).cumsum(-1)
    # keep the smallest prefix whose mass reaches p (its first token always)
    drop = cumulative - torch.softmax(values, dim=-1) >= p
    out = scaled.clone()
    out[order[drop]] = float("-inf")
    return out
