"""The `grumem` agent loop: verl's AgentLoopBase driving the GRU-Mem turn order
(grumem.core.turn_loop, the workflow's own) over a sessions row, one policy call a
turn, its memory carried to the next.

Each Ask's messages are tokenized with the policy's chat template by verl's
continuous-token builder; a prompt longer than rollout.prompt_length is an error
naming its largest component, never verl's left-truncation, as a turn over the
row's budget is (TurnBudgetError). One `server_manager.generate` an Ask; the answer
is decoded without any clean-up of spaces (the candidate memory is kept verbatim)
and given back to the loop, which reads it, carries the memory and, at L2, stops
on a parsed `end`. One ask a turn (grumem.verl.rollout.rollout_rules says why).

`run` returns one TurnOutput per turn (verl's v1 trainer makes each a training
row), each holding its answered turn (`turn`). The group step sets their scores
after all rollout.n rollouts of the row (grumem.verl.worker) and writes each turn's
extra_fields["grumem"]; a TurnOutput carries its own score into the row's
rm_scores, which verl's postprocess would otherwise overwrite with the last turn's.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.utils.profiler import simple_timer

from grumem.core.rollout_row import AGENT_NAME, RowTurn, row_turns
from grumem.core.turn_loop import Abort, Ask, TurnLoop
from grumem.errors import TurnBudgetError
from grumem.io.template_files import GRU_MEM_TEMPLATE
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.rollout_row import RolloutRow
from grumem.verl.online_overrides import LEVEL_KEY
from grumem.verl.rollout import RolloutTurn, read_rollout_row, rollout_builder, rollout_rules


class TurnOutput(AgentLoopOutput):  # type: ignore[misc]  # verl's class: Any to mypy
    """One turn's training row. `turn` is what its answer did; `turn_score` its value
    for verl: the group step's advantage Â_t in training, the rollout's return in
    validation."""

    turn: RolloutTurn
    turn_score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = super().as_dict()
        out.pop("turn", None)  # in extra_fields["grumem"], once scored
        out.pop("turn_score", None)
        if self.turn_score is not None:
            # the score at the last response token, where verl puts a reward_score
            scores = torch.zeros_like(out["response_mask"], dtype=torch.float32)
            scores[-1] = self.turn_score
            out["rm_scores"] = scores
        return out


@register(AGENT_NAME)
class GrumemAgentLoop(AgentLoopBase):  # type: ignore[misc]  # verl's class: Any to mypy
    """The GRU-Mem loop as a verl agent loop; `template` (an agent_loop_config_path
    entry's keyword) is the prompt template the row was exported with."""

    def __init__(self, *args: Any, template: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.template = template or str(GRU_MEM_TEMPLATE)
        # one counter for the loop's rollouts: its cache holds their memories
        self.tokens = cl100k_tokens()
        self.prompt_length: int = self.rollout_config.prompt_length
        self.response_length: int = self.rollout_config.response_length
        # `grumem verl-config --level` (++grumem_level): the rollouts' level over the rows'
        self.level: str | None = self.config.get(LEVEL_KEY)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[TurnOutput]:
        row = read_rollout_row(kwargs)
        turns = row_turns(row, rollout_builder(row, self.template, self.tokens))
        loop = TurnLoop(turns, rollout_rules(row, self.tokens, self.level))
        request_id = uuid4().hex  # one a rollout: its turns share the template's prefix
        outputs: list[TurnOutput] = []
        for step in loop:
            if isinstance(step, Abort):
                # answered with text, a rollout ends early only on its budget
                assert step.component is not None  # a budget abort names its component
                raise TurnBudgetError(
                    f"{row.where}, turn t={step.prompt.t}: {step.detail}", step.component
                )
            output, text = await self._generate(row, step, request_id, sampling_params)
            turn = RolloutTurn.of(loop.answer(text), self.tokens)
            outputs.append(TurnOutput(turn=turn, **output))
        return outputs

    async def _generate(
        self,
        row: RolloutRow,
        ask: Ask[RowTurn],
        request_id: str,
        sampling_params: dict[str, Any],
    ) -> tuple[dict[str, Any], str]:
        """The policy's answer to one Ask: the training row's fields, and its text."""
        builder = self.continuous_token_builder
        prompt_ids = await self.loop.run_in_executor(
            None, lambda: builder.build_initial_tokens(ask.messages)
        )
        self._check_prompt_length(row, ask, prompt_ids)
        timing: dict[str, float] = {}
        with simple_timer("generate_sequences", timing):
            generated = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
            )
        merged, response_mask, response_logprobs = await self.ct_merge_assistant_token(
            prompt_ids,
            generated.token_ids,
            [],
            [] if generated.log_probs else None,
            assistant_logprobs=generated.log_probs or None,
        )
        response_ids = merged.token_ids[len(merged.token_ids) - len(response_mask) :]
        prompt_ids = merged.token_ids[: len(merged.token_ids) - len(response_mask)]
        # what the policy wrote, byte for byte: no space clean-up, or the memory it
        # keeps would not be the text it generated
        text: str = self.tokenizer.decode(
            generated.token_ids[: self.response_length],
            skip_special_tokens=True,
            clean_up_tokenization_spaces=False,
        )
        preempted = generated.num_preempted
        n = self.response_length
        output = {
            "prompt_ids": prompt_ids,
            "response_ids": response_ids[:n],
            "response_mask": response_mask[:n],
            "response_logprobs": response_logprobs[:n] if response_logprobs else None,
            "num_turns": 2,
            "metrics": AgentLoopMetrics(
                generate_sequences=timing["generate_sequences"],
                num_preempted=-1 if preempted is None else preempted,
            ),
            "extra_fields": {**generated.extra_fields, "turn_scores": [], "tool_rewards": []},
        }
        return output, text

    def _check_prompt_length(
        self, row: RolloutRow, ask: Ask[RowTurn], prompt_ids: list[int]
    ) -> None:
        if len(prompt_ids) <= self.prompt_length:
            return
        parts = {
            "question": row.extra_info.question,
            "memory": ask.memory_before or "",
            "section": ask.prompt.chunk.text,
        }
        sizes = {
            c: len(self.tokenizer.encode(text, add_special_tokens=False))
            for c, text in parts.items()
        }
        component = max(sizes, key=lambda c: sizes[c])
        raise TurnBudgetError(
            f"{row.where}, turn t={ask.t}: the prompt is {len(prompt_ids)} policy tokens,"
            f" over actor_rollout_ref.rollout.prompt_length {self.prompt_length} (its"
            f" {component} is {sizes[component]}): raise the prompt length or lower"
            f" budget.{component} and re-run the prompts stage",
            component,
        )
