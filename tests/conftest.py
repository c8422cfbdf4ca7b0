"""Shared fixtures. Servers are real processes on 127.0.0.1, never in-process fakes."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

# ------------------------------------------------------------------ helpers


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_under_pytest_basetemp(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Every temporary file of a test and of the processes it starts (snakemake's
    own temporary directory, left behind when a test kills snakemake on purpose)
    lands under pytest's basetemp, which pytest prunes, never loose in /tmp."""
    patch = pytest.MonkeyPatch()
    patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmpdir")))
    patch.setattr(tempfile, "tempdir", None)  # gettempdir() re-reads TMPDIR
    yield
    patch.undo()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (prefer --port 0 where a server supports it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------- the fake LLM server

FAKE_SERVER_START_TIMEOUT_S = 30.0


class FakeServerProcess:
    """`python -m grumem.llm.fake_server` running as a subprocess."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, stderr_path: Path):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.url}/v1"
        self.stderr_path = stderr_path

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/_fake/stats")

    def reset(self) -> None:
        self._call("POST", "/_fake/reset", {})

    def set_script(self, script: Mapping[str, Any]) -> None:
        self._call("POST", "/_fake/script", dict(script))

    def use(self, script: Mapping[str, Any]) -> FakeServerProcess:
        """Switch to `script` with all counters at zero (for a server shared by tests)."""
        self.set_script(script)
        self.reset()
        return self

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; SIGKILL if it does not stop in time. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """One line of the child's stdout, or b"" if it exits or times out first."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    buf = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return b""
            chunk = os.read(fd, 4096)
            if not chunk:
                return b""
            buf += chunk
    return buf


def _die_with_parent() -> None:
    """In the child: get SIGTERM when pytest dies, even by SIGKILL (Linux), so a killed
    test run leaves no server behind."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_fake_server(
    script: Mapping[str, Any] | str | os.PathLike[str], workdir: Path
) -> FakeServerProcess:
    """Start a fake server on a free port; return once it announces its address."""
    if isinstance(script, Mapping):
        path = workdir / f"script-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(script), encoding="utf-8")
    else:
        path = Path(script)
    stderr_path = workdir / f"stderr-{time.monotonic_ns()}.log"
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grumem.llm.fake_server", "--script", str(path), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    line = _read_line(proc, FAKE_SERVER_START_TIMEOUT_S).decode("utf-8", "replace")
    prefix = "listening http://127.0.0.1:"
    if not line.startswith(prefix):
        proc.kill()
        proc.wait()
        raise RuntimeError(
            f"fake server did not start (said {line!r}); stderr:\n"
            + stderr_path.read_text(errors="replace")
        )
    port = int(line[len(prefix) :].split("/", 1)[0])
    return FakeServerProcess(proc, port, stderr_path)


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
