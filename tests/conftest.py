"""Shared fixtures. Servers are real processes on 127.0.0.1, never in-process fakes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from support.export import exported_trajectories, work_dir
from support.harness import FakeServerProcess, start_fake_server

# ------------------------------------------------------------------ helpers


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_under_pytest_basetemp(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Every temporary file of a test and of the processes it starts (snakemake's
    own temporary directory, left behind when a test kills snakemake on purpose),
    and grumem's cache, lands under pytest's basetemp, which pytest prunes, never
    loose in /tmp or the user's home."""
    patch = pytest.MonkeyPatch()
    patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmpdir")))
    patch.setattr(tempfile, "tempdir", None)  # gettempdir() re-reads TMPDIR
    # the compiled-validator cache (grumem.io.startup_cache) too, not the user's
    patch.setenv("GRUMEM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    patch.undo()


# ----------------------------------------------------------- the fake LLM server


@pytest.fixture
def fake_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., FakeServerProcess]]:
    """Factory: `server = fake_server(script_dict_or_path)`; every server stops at teardown."""
    started: list[FakeServerProcess] = []
    workdir = tmp_path_factory.mktemp("fake-server")

    def start(script: Mapping[str, Any] | str | os.PathLike[str]) -> FakeServerProcess:
        server = start_fake_server(script, workdir)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def module_fake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeServerProcess]:
    """One fake server for a whole test module, to save start-ups: each test calls
    `.use(script)` first. Not for tests that leave requests running (hang, capacity
    with a client that gives up): those would show in the next test's in_flight_max."""
    server = start_fake_server({"replies": []}, tmp_path_factory.mktemp("fake-server"))
    yield server
    server.stop()


# ----------------------------------------------------------- the export's fixture


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """fixtures/export/ copied to a temporary directory, with its kappa.json."""
    return work_dir(tmp_path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """fixtures/export/'s trajectories as exported, plus one with a re-ask and an abort."""
    return exported_trajectories(tmp_path_factory.mktemp("export"))
