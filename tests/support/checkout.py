"""Where the checkout's own files are (fixtures, scripts, the workflow).

Tests read them from the checkout they run in; the package never does: it
knows only its package data (grumem.io.paths), so it works installed anywhere.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = REPO_ROOT / "fixtures"
