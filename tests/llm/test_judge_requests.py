"""The judge's request body: the judge's model, one user message, its own sampling with
seed 0 (one judgement per pair, so a rerun's request is the cache's key), the grammar."""

from __future__ import annotations

import json

from grumem.config.judge_settings import JudgeSettings
from grumem.core.grammar import fitting_think_chars, gbnf
from grumem.llm.judge_requests import judge_request
from support.judge import make_settings


def test_the_request_carries_the_judges_sampling_seed_0_and_grammar(tmp_path):
    s = JudgeSettings.from_settings(
        make_settings(None, tmp_path, judge={"max_tokens": 64}, llm={"grammar": True})
    )
    body = judge_request(s, "is this evidence?")
    assert body == json.dumps(
        {
            "model": "fake-judge",
            "messages": [{"role": "user", "content": "is this evidence?"}],
            "temperature": 0.0,
            "top_p": 1.0,
            "max_tokens": 64,
            "seed": 0,
            "grammar": gbnf("judge", fitting_think_chars(64)),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
