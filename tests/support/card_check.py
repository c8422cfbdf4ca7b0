"""Run by tests/corpus/test_card.py with .venv-verl's python (it has Hugging Face's
`datasets`, the main venv does not): load an export's directory as the Hub would,
through its README.md's configs.

    card_check.py CORPUS_DIR [CONFIG...]

Prints one JSON object: per config asked (none: the default), its splits with
their row counts and column names; the test asserts on it.
"""

from __future__ import annotations

import json
import sys

import datasets


def describe(d: datasets.DatasetDict) -> dict:
    return {
        split: {"rows": ds.num_rows, "columns": ds.column_names, "features": str(ds.features)}
        for split, ds in d.items()
    }


def main() -> None:
    corpus, configs = sys.argv[1], sys.argv[2:]
    out = {"datasets": datasets.__version__}
    out["default"] = describe(datasets.load_dataset(corpus))
    for name in configs:
        out[name] = describe(datasets.load_dataset(corpus, name))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
