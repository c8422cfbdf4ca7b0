"""The judge's settings: `labels.judge` over the `llm` section, its own sampling, and the
grammar bounded so that an answer fits max_tokens."""

from __future__ import annotations

import pytest

from grumem.config.judge_settings import JudgeSettings
from grumem.core.grammar import JUDGE_GRAMMAR, fitting_think_chars, gbnf
from grumem.errors import GrammarUnsupported
from support.judge import make_settings


def test_judge_settings_override_the_llm_section(tmp_path):
    s = JudgeSettings.from_settings(
        make_settings(
            "http://127.0.0.1:9/v1",
            tmp_path,
            judge={"base_url": "http://127.0.0.1:8/v1", "max_tokens": 64},
            llm={"temperature": 0.7, "grammar": True},
        )
    )
    assert (s.model, s.base_url) == ("fake-judge", "http://127.0.0.1:8/v1")
    assert s.llm["base_url"] == "http://127.0.0.1:8/v1" and s.llm["model"] == "fake-judge"
    # the judge's own sampling, not the rollout's
    assert s.sampling == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64}
    assert s.max_tokens == 64
    # judge.grammar null: llm.grammar decides, with the judge's shape, the think text
    # bounded so that the answer fits max_tokens (64 tokens: 44 for the text, 2 characters each)
    assert s.grammar == {"grammar": gbnf("judge", 88)} and fitting_think_chars(64) == 88
    assert JUDGE_GRAMMAR.replace("[^<]*", "[^<]{0,88}") == s.grammar["grammar"]
    s = JudgeSettings.from_settings(
        make_settings(
            None, tmp_path, judge={"model": None, "grammar": False}, llm={"grammar": True}
        )
    )
    assert (s.model, s.base_url, s.grammar) == ("rollout-model", None, {})
    s = JudgeSettings.from_settings(
        make_settings(None, tmp_path, judge={"grammar": True, "server_kind": "vllm"})
    )
    assert s.grammar == {"structured_outputs": {"grammar": gbnf("judge", fitting_think_chars(256))}}
    with pytest.raises(GrammarUnsupported):
        JudgeSettings.from_settings(
            make_settings(None, tmp_path, judge={"grammar": True, "server_kind": "openai"})
        )
