"""Driving the real `snakemake` command on a project in a temporary directory."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import yaml

SPLITS = ("train", "val", "test")
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "fixtures" / "demo"
# the demo project's split, as config.yaml sets it
DEMO_SPLIT = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))["projects"]["demo"][
    "split"
]


def demo_project(**overrides: Any) -> dict[str, Any]:
    project = {
        "chunks": str(DEMO / "chunks" / "*.jsonl"),
        "queries": str(DEMO / "queries.yaml"),
        "labels": {"source": "file", "path": str(DEMO / "labels.jsonl")},
        "calibration": str(DEMO / "calibration.jsonl"),
        # config.yaml's: 3 train, 1 val, 1 test session
        "split": DEMO_SPLIT,
    }
    project.update(overrides)
    return project


def write_config(
    workdir: Path,
    base_url: str | None,
    projects: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    loop: dict[str, Any] | None = None,
    **top: Any,
) -> Path:
    config = {
        "projects": projects or {"demo": demo_project()},
        "shard_size": 3,
        "llm": {
            "base_url": base_url,
            "model": "fake-model",
            "concurrency": 4,
            "timeout": 10,
            "retries": 3,
            "backoff": 0.01,
            "grammar": False,
            "max_tokens": 256,
            **(llm or {}),
        },
        "loop": {"level": "L1", "samples": 1, **(loop or {})},
        **top,
    }
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", "")])
    return e


def snakemake(
    workdir: Path, *args: str, check: bool = True, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    environ = kwargs.pop("env", None) or env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    return proc


def read_lines(path: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


# ------------------------------------------------- the docs' commands, as a reader runs them

# what a checkout holds that the docs' commands read (the package itself is the venv's)
COPIED = [
    "Snakefile",
    "Makefile",
    "pyproject.toml",
    "environment.yml",
    "workflow",
    "fixtures",
    "templates",
    "docs",
]


def my_yaml(base_url: str) -> dict:
    """docs/configuration.md's `my.yaml`: a project of the reader's own (the demo's files under
    another name), on their server."""
    return {
        "projects": {
            "mine": {
                "chunks": "fixtures/demo/chunks/*.jsonl",
                "queries": "fixtures/demo/queries.yaml",
                "labels": {"source": "file", "path": "fixtures/demo/labels.jsonl"},
                "calibration": "fixtures/demo/calibration.jsonl",
            }
        },
        "llm": {"base_url": base_url, "model": "fake-model", "concurrency": 4},
    }


def checkout_copy(work: Path, base_url: str) -> None:
    """A copy of the checkout as the docs' commands see it, its config on the fake server.
    Times are kept, so make finds the venv's install stamp newer than pyproject.toml."""
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, work / name, copy_function=shutil.copy2)
        else:
            shutil.copy2(src, work / name)
    (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    # the workflow's llm and every evaluated policy: requests differ by their other
    # settings (the demo's policies by the grammar), so the cache keeps them apart
    for llm in [config["llm"], *config.get("evaluate", {}).get("policies", {}).values()]:
        llm.update({"base_url": base_url, "model": "fake-model", "concurrency": 4})
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (work / "my.yaml").write_text(yaml.safe_dump(my_yaml(base_url)), encoding="utf-8")


def docs_env() -> dict[str, str]:
    """The reader's shell: the venv not activated (the docs name `.venv/bin/...`),
    the temporary files under pytest's."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env.pop("VIRTUAL_ENV", None)
    return env


def shell(
    work: Path, text: str, what: str, check: bool = True, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`text` in bash (pipefail) in `work`, as a reader's shell runs it (with HOME
    `home`, when given: a reader's machine)."""
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", text],
        cwd=work,
        env=docs_env() if home is None else {**docs_env(), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0 or not check, (
        f"{what} failed ({proc.returncode}) as `{text}`:\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return proc


def key_forms(key: str) -> set[bytes]:
    """Every spelling of the key a leak could take: raw, stripped, repr, bytes repr,
    JSON-escaped, URL-encoded (written here independently of the client's list)."""
    forms = {
        key,
        key.strip(),
        repr(key)[1:-1],
        repr(key.encode())[2:-1],
        json.dumps(key)[1:-1],
        quote(key, safe=""),
        quote_plus(key),
    }
    return {f.encode() for f in forms}


def assert_no_secret(
    work: Path,
    key: str,
    *outputs: str,
    under: tuple[str, ...] = ("results", "logs", ".snakemake"),
) -> int:
    """No form of the key in any file under `under` (directories of `work`; "." is all
    of it), nor in the command's output; returns how many files were read."""
    files = [f for sub in under for f in files_under(work / sub)]
    forms = key_forms(key)
    for f in files:
        data = f.read_bytes()
        for form in forms:
            assert form not in data, f"{form!r} in {f}"
    for text in outputs:
        for form in forms:
            assert form not in text.encode(), f"{form!r} in the command's output"
    return len(files)


FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"


LOG = "results/demo/log.jsonl"


def fake_demo_script(**extra) -> dict:
    return {**yaml.safe_load(FAKE_DEMO.read_text(encoding="utf-8")), **extra}


def write_session(path: Path, session: str, texts: list[str]) -> None:
    lines = [
        {"session": session, "index": i, "records": [{"role": "user", "text": t}]}
        for i, t in enumerate(texts)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def write_queries(path: Path, question: str = "What failed?") -> None:
    path.write_text(yaml.safe_dump({"queries": [{"id": "q", "question": question}]}))


CORPUS = ("trajectories.jsonl", "turns.parquet", "sessions.parquet", "summary.json")
CORPUS += tuple(f"{name}-{s}.parquet" for name in ("turns", "sessions") for s in SPLITS)


def corpus_bytes(work: Path, project: str = "demo") -> dict[str, bytes]:
    return {name: (work / f"results/{project}/corpus" / name).read_bytes() for name in CORPUS}


# The demo corpus against the fake server's demo script: moving code must not move
# a byte. A deliberate change of the corpus (a new field, a reward rule) updates
# these with its reason in the commit. turns.parquet is pinned by its schema and
# rows, not its bytes: its footer names the pyarrow version that wrote it, which a
# fresh venv may upgrade. The shard rule orders the rows (`stable`, the default,
# puts the demo's files in other shards than `sorted`, and extra_info.index, a row's
# place, follows); the order-free digests are the same under both rules.
# sessions.parquet is pinned like turns.parquet; its rows are sorted by (session,
# query_id), so no shard rule moves them. The split files hold the same rows.
PINNED_DEMO_CORPUS = {
    "trajectories.jsonl": "48a7f437519a6b95cfb5f9f0cc51307b41d528b0683dd22c80ef3b04fca2c345",
    "summary.json": "73cd03971803a7e357b7a4efe6e49df0fea631667741eb24f301caf8aead120a",
    "turns.parquet rows": "1502eac9832df5f4570fa05ef75e2140d1b4bcf0787a6596e4bf83fa7d635175",
    "trajectories, any order": "e9444131b1bd2a1f9f22492febea26c972565e38ee03ef2ed4f3a3797be04d1a",
    "parquet rows, any order": "cd84ee74d3aed7f5c88543753bf463ad8da9f5a5daff19577522678136c93264",
    "sessions.parquet rows": "fc5c90d85fdf7ead6fce4e4cea1d787712b52c4a2445ac372d54386fee496169",
}


def corpus_digests(work: Path, project: str = "demo") -> dict[str, str]:
    import pyarrow.parquet as pq

    corpus = work / f"results/{project}/corpus"
    table = pq.read_table(corpus / "turns.parquet")
    rows = json.dumps({"schema": str(table.schema), "rows": table.to_pylist()}, sort_keys=True)
    sessions = pq.read_table(corpus / "sessions.parquet")
    session_rows = {"schema": str(sessions.schema), "rows": sessions.to_pylist()}
    # the summary names the log's sha256 (its attempts carry latencies, which differ
    # from run to run; the corpus does not) and the labels' path in this checkout
    summary = json.loads((corpus / "summary.json").read_bytes())
    del summary["inputs"]["log_sha256"]
    summary["inputs"]["labels"] = Path(summary["inputs"]["labels"]).relative_to(REPO).as_posix()
    lines = (corpus / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
    # a row's extra_info.index is its place in the file: the rest is what it says
    rows_sorted = sorted(
        json.dumps({**r, "extra_info": {**r["extra_info"], "index": None}}, sort_keys=True)
        for r in table.to_pylist()
    )
    return {
        "trajectories.jsonl": sha256_bytes(b"".join(lines)),
        "summary.json": sha256_bytes(json.dumps(summary, sort_keys=True).encode("utf-8")),
        "turns.parquet rows": sha256_bytes(rows.encode("utf-8")),
        # the same records in any order: what a change of shard rule may not move
        "trajectories, any order": sha256_bytes(b"".join(sorted(lines))),
        "parquet rows, any order": sha256_bytes("\n".join(rows_sorted).encode("utf-8")),
        "sessions.parquet rows": sha256_bytes(
            json.dumps(session_rows, sort_keys=True).encode("utf-8")
        ),
    }


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def jobs(dry_run_stdout: str) -> dict[str, int]:
    """rule -> job count from a dry run's "Job stats" table ({} for nothing to do)."""
    if "Job stats:" not in dry_run_stdout:
        return {}
    table = dry_run_stdout.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    return {rule: int(n) for rule, n in (line.split() for line in table) if rule != "total"}
