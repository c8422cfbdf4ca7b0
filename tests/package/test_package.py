"""grumem without its checkout: an installed package, and the workflow as a module.

`pip install .` (not editable) into a fresh venv must carry the templates and
schemas (package data, grumem.io.paths), so `grumem` run anywhere gives the golden
prompt bytes and validates a config with its own schema. And the workflow used
as a Snakemake module of a workflow in another directory builds the pinned demo
corpus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import grumem.io.paths
from grumem.errors import GrumemError
from support.checkout import FIXTURES_DIR, REPO_ROOT
from support.workflow import (
    CORPUS,
    FAKE_DEMO,
    PINNED_DEMO_CORPUS,
    corpus_digests,
    demo_project,
    env,
    write_config,
)

CARD_QUESTION = "Which errors did the agent hit, and what fixed each one?"
CARD_MEMORY = "kubectl get pods fails without --namespace; fixed by adding --namespace=kube-system"
CARD_CHUNKS = FIXTURES_DIR / "card-example.jsonl"
EXPECTED = FIXTURES_DIR / "expected"
DEMO = FIXTURES_DIR / "demo"
# what the wheel is built from: the package's metadata, its code and its data
BUILD_INPUTS = ("pyproject.toml", "README.md", "src", "workflow/schemas", "templates")


def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_under_src_is_in_the_packages_list() -> None:
    # the list is explicit (find cannot map workflow/schemas and templates), so a
    # new subpackage left out of it would be missing from every non-editable install
    src = REPO_ROOT / "src"
    found = {
        ".".join(p.parent.relative_to(src).parts)
        for p in (src / "grumem").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == {"grumem.schemas", "grumem.templates"}


def test_package_data_is_the_workflows_files() -> None:
    # the editable install this suite runs on reads the files the workflow reads
    assert grumem.io.paths.SCHEMAS_DIR.resolve() == REPO_ROOT / "workflow" / "schemas"
    assert grumem.io.paths.TEMPLATES_DIR.resolve() == REPO_ROOT / "templates"
    dirs = pyproject()["tool"]["setuptools"]["package-dir"]
    assert dirs == {
        "": "src",
        "grumem.schemas": "workflow/schemas",
        "grumem.templates": "templates",
    }


def test_data_package_that_is_not_files_is_refused_by_name(tmp_path, monkeypatch) -> None:
    # a zipped install has no paths to hand to Snakemake as a rule's input
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_data/__init__.py", "")
        z.writestr("zipped_data/gru-mem.txt", "x")
    monkeypatch.syspath_prepend(str(archive))
    with pytest.raises(GrumemError, match=r"zipped_data is not installed as files on disk"):
        grumem.io.paths.package_dir("zipped_data")


def copy_build_inputs(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in BUILD_INPUTS:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, dest / name, ignore=ignore)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, dest / name)


def fresh_venv(path: Path, tmp: Path) -> Path:
    """A new venv with grumem installed from a copy of the build inputs, which is
    then deleted. Its dependencies are this venv's (a .pth names our site-packages,
    whose own .pth files, the editable grumem among them, are not read), so pip
    installs offline: no index, no build isolation, no cache."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_grumem_test_dependencies.pth").write_text(
        "".join(f"{p}\n" for p in sorted(ours)), encoding="utf-8"
    )
    source = tmp / "source"
    copy_build_inputs(source)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--no-cache-dir",
            "--ignore-installed",
            str(source),
        ],
        check=True,
        env={**os.environ, "TMPDIR": str(tmp), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    shutil.rmtree(source)
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("installed")
    return fresh_venv(tmp / "venv", tmp)


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory with nothing of the checkout in it."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    return cwd


def run_installed(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(venv / "bin" / "grumem"), *args],
        capture_output=True,
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )


def test_installed_grumem_reads_its_own_package_data(installed: Path, elsewhere: Path) -> None:
    out = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import grumem, grumem.io.paths as p; "
            "print(grumem.__file__, p.SCHEMAS_DIR, p.TEMPLATES_DIR, sep='\\n')",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        check=True,
    ).stdout.splitlines()
    for path in out:
        assert Path(path).is_relative_to(installed), f"{path} is not in the installed venv"
    schemas, templates = Path(out[1]), Path(out[2])
    assert sorted(p.name for p in schemas.glob("*.schema.yaml")) == sorted(
        p.name for p in (REPO_ROOT / "workflow" / "schemas").glob("*.schema.yaml")
    )
    for name in ("gru-mem.txt", "judge.txt"):
        assert (templates / name).read_bytes() == (REPO_ROOT / "templates" / name).read_bytes()


def test_installed_grumem_ships_the_pages_script_and_style(
    installed: Path, elsewhere: Path
) -> None:
    """The viewer's and the calibration page's script and style are package data: an
    installed grumem writes a viewer page whose script is the checkout's."""
    code = (
        "from grumem.report.viewer import asset; from grumem.tools import calibrate_serve as c;"
        " import grumem.report.viewer as v; print(v.__file__);"
        " print(len(asset('viewer.js')), len(asset('viewer.css')),"
        " len(c.asset('calibrate.js')), len(c.asset('calibrate.css')))"
    )
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", code],
        capture_output=True, text=True, cwd=elsewhere, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert Path(out[0]).is_relative_to(installed)
    sizes = [int(n) for n in out[1].split()]
    src = REPO_ROOT / "src" / "grumem"
    files = ("report/viewer.js", "report/viewer.css", "tools/calibrate.js", "tools/calibrate.css")
    assert sizes == [len((src / f).read_text(encoding="utf-8")) for f in files]


@pytest.mark.parametrize(
    ("golden", "args"),
    [
        ("prompt-t1.txt", ("--index", "0")),
        ("prompt-tn.txt", ("--index", "1", "--memory", CARD_MEMORY)),
    ],
)
def test_installed_grumem_prompt_gives_the_golden_bytes(
    installed: Path, elsewhere: Path, golden: str, args: tuple[str, ...]
) -> None:
    out = run_installed(
        installed,
        elsewhere,
        "prompt",
        "--question",
        CARD_QUESTION,
        "--chunk-file",
        str(CARD_CHUNKS),
        *args,
    )
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == (EXPECTED / golden).read_bytes()


def prompts_args(config: Path, out: Path) -> list[str]:
    chunk_file = sorted((DEMO / "chunks").glob("*.jsonl"))[0]
    return [
        "prompts",
        "--config",
        str(config),
        "--project",
        "demo",
        "--queries",
        str(DEMO / "queries.yaml"),
        "--out",
        str(out),
        str(chunk_file),
    ]


def test_installed_grumem_validates_a_config_with_its_schema(
    installed: Path, elsewhere: Path
) -> None:
    config = {"projects": {"demo": demo_project()}, "llm": {"model": "m"}}
    good = elsewhere / "good.yaml"
    good.write_text(yaml.safe_dump(config), encoding="utf-8")
    # the schema's defaults (system prompt, sampling, budget) are in every request's
    # bytes: the installed grumem writes what the checkout's writes
    out = run_installed(installed, elsewhere, *prompts_args(good, elsewhere / "installed.jsonl"))
    assert out.returncode == 0, out.stderr.decode()
    subprocess.run(
        [sys.executable, "-m", "grumem", *prompts_args(good, elsewhere / "checkout.jsonl")],
        capture_output=True,
        check=True,
    )
    written = (elsewhere / "installed.jsonl").read_bytes()
    assert written and written == (elsewhere / "checkout.jsonl").read_bytes()

    bad = elsewhere / "bad.yaml"
    config["llm"]["modle"] = "m"
    bad.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = run_installed(installed, elsewhere, *prompts_args(bad, elsewhere / "bad.jsonl"))
    assert out.returncode == 1
    assert f"{bad}: field 'llm'" in out.stderr.decode()
    assert "'modle' was unexpected" in out.stderr.decode()
    assert not (elsewhere / "bad.jsonl").exists()


def readme_module_snakefile() -> str:
    """The Snakefile of docs/configuration.md's "From another workflow", for this
    checkout."""
    readme = (REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = readme.split("## From another workflow\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"/path/to/grumem/Snakefile"' in code
    return code.replace("/path/to/grumem/Snakefile", str(REPO_ROOT / "Snakefile"))


def test_readme_module_snakefile_plans_every_stage_from_another_directory(tmp_path) -> None:
    write_config(tmp_path, None)
    (tmp_path / "Snakefile").write_text(readme_module_snakefile(), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env(),
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    # grumem's default target is the default; every stage runs under its prefixed name
    jobs = {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("grumem_")}
    assert {"grumem_all", "grumem_prompts", "grumem_responses", "grumem_gates"} <= jobs
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_workflow_as_a_module_of_another_builds_the_pinned_corpus(
    tmp_path, fake_server, installed: Path
) -> None:
    # another project's workflow: its own directory, Snakefile and config, run by
    # the installed grumem's venv (its jobs call that grumem, which reads its own
    # templates); the corpus is asked for by path, whatever the target rule is called
    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url)
    (tmp_path / "Snakefile").write_text(readme_module_snakefile(), encoding="utf-8")
    targets = [f"results/demo/corpus/{name}" for name in CORPUS]
    proc = subprocess.run(
        [str(installed / "bin" / "python"), "-m", "snakemake", "-p", "--cores", "2", *targets],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    # the rules passed the installed package's template, not a file of a checkout
    assert f"--template {installed}/lib/" in proc.stdout + proc.stderr
    assert corpus_digests(tmp_path) == PINNED_DEMO_CORPUS
    # the jobs' logs are where this workflow's rules put them
    assert (tmp_path / "logs" / "kappa" / "demo.log").is_file()


def test_installed_grumem_is_marked_typed(installed: Path, elsewhere: Path) -> None:
    """PEP 561: py.typed ships, so a type checker reads grumem's annotations."""
    code = (
        "import importlib.resources as r; print(r.files('grumem').joinpath('py.typed').is_file())"
    )
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", code],
        capture_output=True, text=True, cwd=elsewhere, check=True,
    ).stdout.strip()  # fmt: skip
    assert out == "True"
