"""The GBNF grammars (grumem.core.grammar) and the request field each server reads."""

from __future__ import annotations

import pytest

from grumem.core.grammar import GATE_GRAMMAR, fitting_text_chars, grammar_fields
from grumem.errors import (
    GrammarUnsupported,
)


def test_grammar_fields_per_server():
    assert grammar_fields("llama.cpp") == {"grammar": GATE_GRAMMAR}
    assert grammar_fields("vllm") == {"structured_outputs": {"grammar": GATE_GRAMMAR}}
    assert "<evidence>" in grammar_fields("llama.cpp", "judge")["grammar"]
    with pytest.raises(GrammarUnsupported, match="llm.grammar"):
        grammar_fields("openai")
    bounded = grammar_fields("llama.cpp", max_text_chars=260)["grammar"]
    assert bounded.endswith("text ::= [^<]{0,260}\n")
    assert bounded.replace("{0,260}", "*") == GATE_GRAMMAR
    assert fitting_text_chars(200) == 210
    with pytest.raises(ValueError, match="max_text_chars"):
        grammar_fields("llama.cpp", max_text_chars=0)
