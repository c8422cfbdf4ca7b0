"""Where the repository's shared files live.

The package is installed editable (`pip install -e .`), so templates and
schemas are read from the checkout they belong to rather than copied into
the package, which would let the two drift apart.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMAS_DIR = REPO_ROOT / "workflow" / "schemas"
TEMPLATES_DIR = REPO_ROOT / "templates"
FIXTURES_DIR = REPO_ROOT / "fixtures"
