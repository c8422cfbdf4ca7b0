"""The `grumem` agent loop: verl's AgentLoopBase running the GRU-Mem loop over a
sessions row, one policy call per chunk, its own memory carried to the next.

Turn t: the prompt is grumem's (grumem.verl.rollout.turn_prompt: the workflow's
template, split and memory slot, its budget), tokenized with the policy's chat
template by verl's continuous-token builder; a prompt longer than
rollout.prompt_length is an error naming its largest component, never verl's
left-truncation. One `server_manager.generate`; the answer is decoded without
any clean-up of spaces (the candidate memory is kept verbatim) and read by the
loop's rules (grumem.verl.rollout.answer_turn). At L2 a parsed `end` stops the
rollout; at L1 it is recorded and the loop goes on.

`run` returns one TurnOutput per turn (verl's v1 trainer makes each a training
row) with extra_fields["grumem"] holding t, chunk_sha, parsed, the gates and the
parse error's tag. Their scores are set by the group step, after all rollout.n
rollouts of the row (grumem.verl.worker); a TurnOutput carries its own score
into the row's rm_scores, which verl's postprocess would otherwise overwrite
with the last turn's.
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

from grumem.core.rollout_row import AGENT_NAME
from grumem.io.template_files import GRU_MEM_TEMPLATE
from grumem.io.tokenizer import cl100k_tokens
from grumem.verl.rollout import (
    Turn,
    TurnBudgetError,
    TurnPrompt,
    answer_turn,
    prompt_builder,
    turn_prompt,
)
from grumem.verl.session_row import SessionRow, read_session_row


class TurnOutput(AgentLoopOutput):
    """One turn's training row. `turn_score` is its value for verl: the group step's
    advantage Â_t in training, the rollout's return in validation."""

    turn_score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out.pop("turn_score", None)
        if self.turn_score is not None:
            # the score at the last response token, where verl puts a reward_score
            scores = torch.zeros_like(out["response_mask"], dtype=torch.float32)
            scores[-1] = self.turn_score
            out["rm_scores"] = scores
        return out


@register(AGENT_NAME)
class GrumemAgentLoop(AgentLoopBase):
    """The GRU-Mem loop as a verl agent loop; `template` (an agent_loop_config_path
    entry's keyword) is the prompt template the row was exported with."""

    def __init__(self, *args: Any, template: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.template = template or str(GRU_MEM_TEMPLATE)
        # one counter for the loop's rollouts: its cache holds their memories
        self.tokens = cl100k_tokens()
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        row = read_session_row(kwargs)
        builder = prompt_builder(row, self.template, self.tokens)
        request_id = uuid4().hex  # one a rollout: its turns share the template's prefix
        outputs: list[AgentLoopOutput] = []
        memory: str | None = None
        for chunk in row.chunks:
            prompt = turn_prompt(builder, row, chunk, memory)
            output, turn = await self._turn(row, prompt, memory, request_id, sampling_params)
            outputs.append(output)
            memory = turn.memory_after
            if turn.stops:
                break
        return outputs

    async def _turn(
        self,
        row: SessionRow,
        prompt: TurnPrompt,
        memory: str | None,
        request_id: str,
        sampling_params: dict[str, Any],
    ) -> tuple[TurnOutput, Turn]:
        builder = self.continuous_token_builder
        prompt_ids = await self.loop.run_in_executor(
            None, lambda: builder.build_initial_tokens(prompt.messages)
        )
        self._check_prompt_length(row, prompt, memory, prompt_ids)
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
        text = self.tokenizer.decode(
            generated.token_ids[: self.response_length],
            skip_special_tokens=True,
            clean_up_tokenization_spaces=False,
        )
        chunk = row.chunks[prompt.t - 1]
        turn = answer_turn(row, chunk, memory, text, self.tokens)
        preempted = generated.num_preempted
        output = TurnOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[: self.response_length],
            response_mask=response_mask[: self.response_length],
            response_logprobs=response_logprobs[: self.response_length]
            if response_logprobs
            else None,
            num_turns=2,
            metrics=AgentLoopMetrics(
                generate_sequences=timing["generate_sequences"],
                num_preempted=-1 if preempted is None else preempted,
            ),
            extra_fields={
                **generated.extra_fields,
                "turn_scores": [],
                "tool_rewards": [],
                "grumem": turn.fields(),
            },
        )
        return output, turn

    def _check_prompt_length(
        self, row: SessionRow, prompt: TurnPrompt, memory: str | None, prompt_ids: list[int]
    ) -> None:
        if len(prompt_ids) <= self.prompt_length:
            return
        parts = {
            "question": row.question,
            "memory": memory or "",
            "section": row.chunks[prompt.t - 1].text,
        }
        sizes = {
            c: len(self.tokenizer.encode(text, add_special_tokens=False))
            for c, text in parts.items()
        }
        component = max(sizes, key=lambda c: sizes[c])
        raise TurnBudgetError(
            f"{row.where}, turn t={prompt.t}: the prompt is {len(prompt_ids)} policy tokens,"
            f" over actor_rollout_ref.rollout.prompt_length {self.prompt_length} (its"
            f" {component} is {sizes[component]}): raise the prompt length or lower"
            f" budget.{component} and re-run the prompts stage",
            component,
        )
