"""The fake server as a process: start it on a free port, talk to its control
endpoints, stop it. Used by tests/conftest.py's fixtures and by the benches."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# tests/, the directory that holds the `support` package: the child imports it from there
SUPPORT_ROOT = Path(__file__).resolve().parents[1]
FAKE_SERVER_START_TIMEOUT_S = 30.0


class FakeServerProcess:
    """`python -m support.fake_server` running as a subprocess."""

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

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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
    """In the child: get SIGTERM when its parent dies, even by SIGKILL (Linux), so a
    killed test run or bench leaves no server behind."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def child_env() -> dict[str, str]:
    """This process's environment with the `support` package importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT_ROOT), env.get("PYTHONPATH")]))
    return env


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
            [sys.executable, "-m", "support.fake_server", "--script", str(path), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=child_env(),
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
