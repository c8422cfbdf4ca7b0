"""Card 003 (M1.3): the GRU-Mem prompt template, a1–a7, plus single-pass substitution."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.chunk_text import ROLE_LABELS, render_records
from grumem.core.template import NO_PREVIOUS_MEMORY, Budget
from grumem.errors import BudgetError, TemplateError
from grumem.io.chunk_files import iter_sessions, read_chunk_file
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder, load_template
from support.checkout import FIXTURES_DIR, REPO_ROOT

CARD_QUESTION = "Which errors did the agent hit, and what fixed each one?"
CARD_MEMORY = "kubectl get pods fails without --namespace; fixed by adding --namespace=kube-system"
CARD_CHUNKS = FIXTURES_DIR / "card-example.jsonl"
EXPECTED = FIXTURES_DIR / "expected"
# sha256 of templates/gru-mem.txt: the paper's Figure 10a as card 003 gives it.
# A change here is a change to the contract the model's gate reliability rests on.
TEMPLATE_SHA256 = "252cf00d59eaf7274af678888e8225c03ecdb60adb8c7fb735937e2c99a653e7"


def grumem_prompt(*args: str) -> bytes:
    out = subprocess.run(
        [sys.executable, "-m", "grumem", "prompt", *args], capture_output=True, check=True
    )
    return out.stdout


def test_template_is_the_card_block() -> None:
    data = GRU_MEM_TEMPLATE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    print(f"templates/gru-mem.txt sha256={digest}")
    assert digest == TEMPLATE_SHA256
    assert data.startswith(b"You are presented with a problem, a section of an article")
    assert data.endswith(b"<section> {chunk} </section>")  # no trailing newline
    assert data.count(b"\n") == 21  # 22 lines, as the card prints them


def test_a1_golden_t1() -> None:
    out = grumem_prompt(
        "--question", CARD_QUESTION, "--chunk-file", str(CARD_CHUNKS), "--index", "0"
    )
    assert out == (EXPECTED / "prompt-t1.txt").read_bytes()


def test_a2_golden_tn() -> None:
    out = grumem_prompt(
        "--question",
        CARD_QUESTION,
        "--chunk-file",
        str(CARD_CHUNKS),
        "--index",
        "1",
        "--memory",
        CARD_MEMORY,
    )
    assert out == (EXPECTED / "prompt-tn.txt").read_bytes()


def test_a3_no_previous_memory_literal() -> None:
    chunk = read_chunk_file(CARD_CHUNKS)[0]
    user = load_prompt_builder().build(CARD_QUESTION, chunk.text, None).user
    assert NO_PREVIOUS_MEMORY == "No previous memory"
    assert "<memory> No previous memory </memory>" in user
    assert "<memory></memory>" not in user and "<memory>  </memory>" not in user


def test_a4_all_tags_present() -> None:
    chunk = read_chunk_file(CARD_CHUNKS)[1]
    user = load_prompt_builder().build(CARD_QUESTION, chunk.text, CARD_MEMORY).user
    for tag in ("problem", "memory", "section"):
        assert user.count(f"<{tag}>") == 1, tag
        assert user.count(f"</{tag}>") == 1, tag
    assert user.index("<problem>") < user.index("<memory>") < user.index("<section>")
    assert user.endswith("</section>")


def test_a5_role_labels_rendered() -> None:
    records = [{"role": r, "text": f"text of {r}"} for r in ROLE_LABELS]
    text = render_records(records)
    assert text == (
        "[User] text of user\n\n[Assistant] text of assistant\n\n"
        "[ToolResult] text of tool_result\n\n[System] text of system"
    )
    user = load_prompt_builder().build("q", text, None).user
    for label in ("[User] ", "[Assistant] ", "[ToolResult] ", "[System] "):
        assert user.count(label) == 1


def test_a6_over_budget_errors() -> None:
    section = " ".join(["token"] * 20000)
    with pytest.raises(BudgetError) as e:
        load_prompt_builder().build(CARD_QUESTION, section, None)
    assert e.value.component == "section"
    assert "section" in str(e.value)
    assert e.value.tokens >= 20000


@pytest.mark.parametrize(
    ("component", "kwargs", "budget"),
    [
        ("question", {"question": "why " * 600}, Budget()),
        ("memory", {"memory": "fact " * 1100}, Budget()),
        ("response", {"max_tokens": 4096}, Budget()),
        ("section", {"section": "x " * 3000}, Budget(context=4000, section=5000)),
    ],
)
def test_over_budget_names_component(component: str, kwargs: dict, budget: Budget) -> None:
    args = {"question": "q", "section": "s", "memory": None, "max_tokens": None} | kwargs
    with pytest.raises(BudgetError) as e:
        load_prompt_builder(budget=budget).build(**args)
    assert e.value.component == component
    assert component in str(e.value)


def test_a7_budget_headroom() -> None:
    """Every chunk of every bundled corpus, at its worst-case memory (the full
    1024-token memory budget), fits under 32768 minus the 2048 response budget."""
    builder = load_prompt_builder()
    worst_memory = "m " * 1000
    files = sorted(FIXTURES_DIR.glob("demo/chunks/*.jsonl")) + [CARD_CHUNKS]
    n = 0
    for _session, chunks in iter_sessions(files):
        for c in chunks:
            prompt = builder.build(CARD_QUESTION, c.text, worst_memory)
            assert prompt.tokens["total"] < 32768 - 2048
            n += 1
    assert n >= 2


def test_single_pass_substitution() -> None:
    builder = load_prompt_builder()
    user = builder.build("What is {chunk}?", "[User] see {memory} and {prompt}", "mem {chunk}").user
    assert "<problem> What is {chunk}? </problem>" in user
    assert "<memory> mem {chunk} </memory>" in user
    assert "<section> [User] see {memory} and {prompt} </section>" in user


@settings(max_examples=200, derandomize=True)
@given(
    question=st.text(max_size=40),
    section=st.text(max_size=80),
    memory=st.one_of(st.none(), st.text(max_size=40)),
)
def test_split_prefix_memory_suffix_equals_build(question, section, memory) -> None:
    builder = load_prompt_builder(budget=Budget(question=10**6, memory=10**6, section=10**6))
    prefix, suffix = builder.split(question, section)
    user = builder.build(question, section, memory).user
    shown = NO_PREVIOUS_MEMORY if memory is None else memory
    assert prefix + shown + suffix == user


def test_system_message_absent_by_default_and_configurable() -> None:
    assert load_prompt_builder().build("q", "s", None).messages()[0]["role"] == "user"
    msgs = load_prompt_builder(system="You are careful.").build("q", "s", None).messages()
    assert msgs == [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": msgs[1]["content"]},
    ]


def test_template_with_missing_slot_is_rejected(tmp_path) -> None:
    bad = tmp_path / "t.txt"
    bad.write_text("<problem> {prompt} </problem> <section> {chunk} </section>")
    with pytest.raises(TemplateError, match="memory"):
        load_template(bad)


def test_prompt_cli_errors_name_the_file(tmp_path) -> None:
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"session":"s","index":0,"records":[{"role":"robot","text":"x"}]}\n')
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "grumem",
            "prompt",
            "--question",
            "q",
            "--chunk-file",
            str(bad),
            "--index",
            "0",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 1
    assert f"{bad}:1" in out.stderr and "records.0.role" in out.stderr
