"""mypy's configuration (pyproject's [tool.mypy], run by `make lint`): core/, corpus/, io/,
records/ and verl/ get every flag --strict sets. The override lists them one by one (a
`strict = true` in an override would make every module strict), so a mypy that adds a
flag to --strict must not leave them short of it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

MYPY = Path(sys.executable).parent / "mypy"


def strict_flags(help_text: str) -> set[str]:
    """The config names of the flags `mypy --help` says --strict enables."""
    m = re.search(
        r"--strict\s+Strict mode; enables the following flags:(.*?)\n  --", help_text, re.S
    )
    assert m, "mypy --help no longer describes --strict as this test reads it"
    listed = re.sub(r"-\s*\n\s*", "-", m.group(1))  # the help wraps flags at their hyphens
    return {f.replace("-", "_") for f in re.findall(r"--([a-z-]+)", listed)}


STRICT = {"grumem.core.*", "grumem.corpus.*", "grumem.io.*", "grumem.records.*", "grumem.verl.*"}


def test_core_corpus_io_records_and_verl_get_every_strict_flag() -> None:
    help_text = subprocess.run(
        [str(MYPY), "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    flags = strict_flags(help_text)
    assert {"disallow_any_generics", "warn_return_any", "no_implicit_reexport"} <= flags
    mypy = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "strict" not in mypy, "strict = true makes every module strict"
    for section in mypy["overrides"]:
        assert "strict" not in section, "strict = true in an override applies to every module"
    (strict,) = [o for o in mypy["overrides"] if "grumem.core.*" in o["module"]]
    assert set(strict["module"]) == STRICT
    on = {k for k, v in {**mypy, **strict}.items() if v is True}
    assert flags - on == set()
