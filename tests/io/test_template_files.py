"""Templates read from their files: the judge's slots, each exactly once, and no memory."""

from __future__ import annotations

import pytest

from grumem.errors import TemplateError
from grumem.io.template_files import JUDGE_TEMPLATE, load_judge_template


def test_the_packaged_judge_template_has_its_slots_once():
    text = load_judge_template()
    assert text == JUDGE_TEMPLATE.read_text(encoding="utf-8")
    assert text.count("{prompt}") == 1 and text.count("{chunk}") == 1


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("{prompt} {prompt} {chunk}", "slot {prompt} appears 2 times"),
        ("{prompt}", "slot {chunk} appears 0 times"),
        ("{prompt} {memory} {chunk}", "no {memory} slot"),
    ],
)
def test_a_judge_template_without_its_slots_is_refused(tmp_path, bad, why):
    path = tmp_path / "t.txt"
    path.write_text(bad)
    with pytest.raises(TemplateError, match=why.replace("{", r"\{").replace("}", r"\}")):
        load_judge_template(path)
