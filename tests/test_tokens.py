"""Token counting: cl100k offline, and nothing written outside the run's own files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grumem.tokens import count_tokens, encoding


def test_counts_are_cl100k() -> None:
    # known cl100k_base counts
    assert count_tokens("hello world") == 2
    assert count_tokens("<|endoftext|>") == 7  # special-token text counts as plain text
    assert encoding().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


def test_loading_the_encoding_leaves_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
    }
    env["TMPDIR"] = str(tmp_path)
    code = "from grumem.tokens import count_tokens; print(count_tokens('hello world'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
    assert list(tmp_path.iterdir()) == []
