"""Prompt templates read from their files (the packaged `templates/`), slots checked."""

from __future__ import annotations

import os
from pathlib import Path

from grumem.core.judge_pairs import JUDGE_SLOTS
from grumem.core.template import SLOTS, Budget, PromptBuilder, check_slots
from grumem.core.tokens import Tokens
from grumem.errors import TemplateError
from grumem.io.paths import TEMPLATES_DIR
from grumem.io.tokenizer import cl100k_tokens

GRU_MEM_TEMPLATE = TEMPLATES_DIR / "gru-mem.txt"
JUDGE_TEMPLATE = TEMPLATES_DIR / "judge.txt"


def load_template(
    path: str | os.PathLike[str] = GRU_MEM_TEMPLATE, slots: tuple[str, ...] = SLOTS
) -> str:
    """Read a template and check it has each of `slots` exactly once."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise TemplateError(f"{path}: is a directory, not a template file") from None
    except OSError as e:
        raise TemplateError(f"{path}: cannot read the template: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TemplateError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    return check_slots(text, str(path), slots)


def load_judge_template(path: str | os.PathLike[str] = JUDGE_TEMPLATE) -> str:
    """Read a judge template: `{prompt}` and `{chunk}` exactly once each, no `{memory}`."""
    text = load_template(path, JUDGE_SLOTS)
    if "{memory}" in text:
        raise TemplateError(f"{path}: a judge template has no {{memory}} slot")
    return text


def load_prompt_builder(
    path: str | os.PathLike[str] = GRU_MEM_TEMPLATE,
    system: str | None = None,
    budget: Budget | None = None,
    tokens: Tokens | None = None,
) -> PromptBuilder:
    """The PromptBuilder of a template file; it counts with `tokens` (the job's counter),
    else with a cl100k counter of its own."""
    return PromptBuilder(
        load_template(path), system, budget or Budget(), tokens=tokens or cl100k_tokens()
    )
