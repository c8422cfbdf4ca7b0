"""GBNF grammars of the response shapes, and the request field each server reads them from.

A small model does not follow the four-tag format unaided (measured with
SmolLM2-135M: prose and numbered lists); constrained decoding makes every
answer well formed. Free text excludes `<`, so the model cannot open or close
a tag inside a text slot, and the strict parser sees exactly one of each.
The grammar goes into the recorded request like any other field. Pure (no
I/O), so the workflow's jobs and the online verl loop, which may not import
grumem.llm, send the same grammar.
"""

from __future__ import annotations

from typing import Any

from grumem.errors import GrammarUnsupported

_GATE = r"""root ::= think check update next
think ::= "<think>" text "</think>\n"
check ::= "<check>" yn "</check>\n"
update ::= "<update>" text "</update>\n"
next ::= "<next>" nx "</next>"
yn ::= "yes" | "no"
nx ::= "continue" | "end"
"""

_JUDGE = r"""root ::= "<think>" text "</think>\n<evidence>" yn "</evidence>"
yn ::= "yes" | "no"
"""

_SHAPES = {"gate": _GATE, "judge": _JUDGE}


def gbnf(which: str = "gate", max_text_chars: int | None = None) -> str:
    """The GBNF of a response shape: `gate` (the four tags: <check> yes|no,
    <next> continue|end) or `judge` (<think>, then <evidence> yes|no).

    The grammar fixes the shape, not the length: a 135M model constrained by
    it still rambles inside <think> until max_tokens cuts the answer off
    mid-tag (measured: 512 tokens of numbered list). `max_text_chars` bounds
    each text slot so the whole answer fits the token budget (about 4.4
    characters a token for this model's English). The bound costs a little
    decoding speed, and it also caps the memory one turn can write: leave it
    None for capable models.
    """
    if which not in _SHAPES:
        raise ValueError(f"unknown grammar {which!r}; one of {sorted(_SHAPES)}")
    if max_text_chars is None:
        return _SHAPES[which] + "text ::= [^<]*\n"
    if max_text_chars < 1:
        raise ValueError(f"max_text_chars must be at least 1, got {max_text_chars}")
    return _SHAPES[which] + f"text ::= [^<]{{0,{int(max_text_chars)}}}\n"


def fitting_text_chars(max_tokens: int, chars_per_token: float = 2.5) -> int:
    """A text-slot bound under which a whole gate answer fits in `max_tokens`.

    Two text slots plus about 80 characters of tags, at a conservative 2.5
    characters a token: SmolLM2 averages 4.4 on English prose but nearer 2.5
    on the tool output and markdown it copies (at 3.0, 1 of 72 demo answers
    was still cut by max_tokens). 200 tokens -> 210."""
    return max(1, int((max_tokens * chars_per_token - 80) // 2))


# Tokens kept for the tags around the judge's think text when its length is bounded.
JUDGE_TAG_TOKENS = 20
# Conservative: SmolLM2 averages 4.4 characters a token on English prose, but
# about 2.5 on tool output it copies (`npm ERR! ` lines), which is what it rambles.
JUDGE_CHARS_PER_TOKEN = 2.0


def fitting_think_chars(max_tokens: int) -> int:
    """The judge grammar's bound on the think text, so that a whole answer fits max_tokens.

    Unbounded, a small model rambles inside <think> until max_tokens cuts
    the answer before <evidence> (measured with SmolLM2-135M: 5 of 6 answers
    cut at 64 tokens, 4 of 10 at 200). The judge's label comes from
    <evidence> alone, so ending the reasoning early costs nothing that a cut
    answer would have kept."""
    return max(1, int((max_tokens - JUDGE_TAG_TOKENS) * JUDGE_CHARS_PER_TOKEN))


GATE_GRAMMAR = gbnf("gate")
JUDGE_GRAMMAR = gbnf("judge")
SERVER_KINDS = ("llama.cpp", "vllm", "openai")


def grammar_fields(
    server_kind: str, which: str = "gate", max_text_chars: int | None = None
) -> dict[str, Any]:
    """The request field(s) carrying the grammar, for `extra` in build_body.

    llama.cpp's server reads a top-level `grammar` (GBNF). vLLM >= 0.12 reads
    `structured_outputs: {grammar: ...}` (its xgrammar backend takes GBNF);
    older vLLM read a top-level `guided_grammar`, removed in 0.12. OpenAI's
    API has no grammar field.
    """
    grammar = gbnf(which, max_text_chars)
    if server_kind == "llama.cpp":
        return {"grammar": grammar}
    if server_kind == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    if server_kind == "openai":
        raise GrammarUnsupported(
            "llm.grammar: true needs a server that takes a grammar (llm.server_kind llama.cpp "
            "or vllm); the OpenAI API has none: set llm.grammar: false"
        )
    kinds = ", ".join(SERVER_KINDS)
    raise GrammarUnsupported(f"llm.server_kind {server_kind!r} is not one of {kinds}")
