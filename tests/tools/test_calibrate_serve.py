"""`grumem calibrate-serve`: the calibration page, as a real server process on 127.0.0.1,
driven over HTTP and by keyboard in headless Chromium (Debian's, through Playwright).

The sample is a real `grumem calibrate-sample` of the demo project (6 pairs), with
HTML put into one chunk (its chunk_sha made to match, as a chunk of a transcript
holding HTML would have it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from playwright.sync_api import expect

from grumem.cli import main
from grumem.core.json_text import dumps, sha256_text
from grumem.errors import RecordError
from grumem.io.jsonl import read_jsonl
from grumem.tools.calibrate import finalize
from support.browser import browser
from support.workflow import DEMO

GRUMEM = [sys.executable, "-m", "grumem.cli"]
URL_RE = re.compile(r"open (http://\S+/\?token=(\S+))")
HTML_CHUNK = "[User] <script>window.pwned = 1</script></div><b id='bold'>bold?</b> &amp; done"
# the answer given to each pair, by its line in the sample
KEYS = ["y", "n", "s", "y", "n", "y"]


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "calibration-sample.jsonl"
    subprocess.run(
        [*GRUMEM, "calibrate-sample", "--queries", str(DEMO / "queries.yaml"), "--labels",
         str(DEMO / "labels.jsonl"), "--n", "6", "--seed", "1", "--out", str(path),
         str(DEMO / "chunks")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 6
    lines[1] = {**lines[1], "chunk": HTML_CHUNK, "chunk_sha": sha256_text(HTML_CHUNK)}
    # lines as calibrate-sample writes them, and two as a hand or an editor may leave them:
    # spaces after the separators, a CRLF ending
    text = [dumps(x) + "\n" for x in lines]
    text[3] = json.dumps(lines[3]) + "\n"
    text[4] = dumps(lines[4]) + "\r\n"
    path.write_bytes("".join(text).encode("utf-8"))
    return path


class Served:
    """`grumem calibrate-serve` running; its URL read from what it prints."""

    def __init__(self, sample: Path, tmp_path: Path, *extra: str):
        self.log = tmp_path / f"serve-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [*GRUMEM, "calibrate-serve", "--sample", str(sample), "--annotator", "alice",
                 "--out", str(tmp_path / "calibration.jsonl"), *extra],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (m := URL_RE.search(self.log.read_text(encoding="utf-8"))):
            assert self.proc.poll() is None, self.log.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, "calibrate-serve printed no URL in 60 s"
            time.sleep(0.05)
        self.url, self.token = m.group(1), m.group(2)
        self.base = self.url.split("/?")[0]

    def request(
        self, path: str, body: Any = None, token: str | None = "", raw: bytes | None = None
    ) -> tuple[int, str, dict[str, str]]:
        """(status, text, headers); token "" is the right one, None none at all."""
        headers = {} if token is None else {"X-Grumem-Token": token or self.token}
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


@pytest.fixture
def serve(tmp_path: Path):
    started: list[Served] = []

    def start(sample: Path, *extra: str) -> Served:
        started.append(Served(sample, tmp_path, *extra))
        return started[-1]

    yield start
    for s in started:
        s.stop(signal.SIGKILL)


# ---------------------------------------------------------------- HTTP


REQUESTS = [
    ("/", None),
    ("/api/state", None),
    ("/api/pair/0", None),
    ("/api/answer", {"pair": 0, "value": "yes"}),
    ("/nowhere", None),
]


def test_every_request_needs_the_token(sample: Path, serve) -> None:
    s = serve(sample)
    before = sample.read_bytes()
    for token in (None, "wrong", s.token.upper(), s.token[:-1]):
        for path, body in REQUESTS:
            status, text, headers = s.request(path, body, token=token)
            assert status == 403, (path, token, status)
            assert "question" not in text and "chunk" not in text
            assert "Access-Control-Allow-Origin" not in headers
    # the token as the printed URL carries it (a query parameter) opens the page
    with urllib.request.urlopen(s.url, timeout=30) as r:
        page = r.read().decode()
        assert r.status == 200 and "script-src 'sha256-" in r.headers["Content-Security-Policy"]
        assert r.headers["Referrer-Policy"] == "no-referrer"
    assert "<title>grumem: calibration</title>" in page
    assert sample.read_bytes() == before


def test_it_listens_on_loopback_only(sample: Path, serve) -> None:
    s = serve(sample)
    assert s.url.startswith("http://127.0.0.1:")
    listening = [c for c in psutil.Process(s.proc.pid).net_connections() if c.status == "LISTEN"]
    assert [c.laddr.ip for c in listening] == ["127.0.0.1"]


def test_bad_requests_change_nothing(sample: Path, serve) -> None:
    s = serve(sample)
    before = sample.read_bytes()
    for body in (
        {"pair": 6, "value": "yes"},
        {"pair": -1, "value": "yes"},
        {"pair": "0", "value": "maybe"},
        {"pair": 0, "value": True},
        {"pair": True, "value": "yes"},
        {"pair": 0.0, "value": "no"},
        {"pair": 0},
        {"pair": 0, "value": "yes", "evidence": True},
        [0, "yes"],
    ):
        status, text, _ = s.request("/api/answer", body)
        assert status == 400, (body, status, text)
    assert s.request("/api/answer", raw=b"{not json")[0] == 400
    assert s.request("/api/pair/6")[0] == 400
    assert s.request("/api/pair/x")[0] == 400
    assert sample.read_bytes() == before
    assert json.loads(s.request("/api/state")[1])["answered"] == 0


def test_an_answer_rewrites_only_its_line(sample: Path, serve) -> None:
    s = serve(sample)
    before = sample.read_bytes().splitlines(keepends=True)
    status, text, _ = s.request("/api/answer", {"pair": 2, "value": "yes"})
    assert status == 200 and json.loads(text)["answers"][2] == "yes"
    after = sample.read_bytes().splitlines(keepends=True)
    assert after[:2] == before[:2] and after[3:] == before[3:]
    assert after[2] == before[2].replace(b'"evidence":null', b'"evidence":true')
    s.request("/api/answer", {"pair": 2, "value": "skip"})
    assert sample.read_bytes().splitlines(keepends=True)[2] == before[2].replace(
        b'"evidence":null', b'"evidence":"skip"'
    )
    # a line of another layout: rewritten as calibrate-sample writes it, its ending kept
    assert b'", "' in before[3] and before[4].endswith(b"\r\n")
    s.request("/api/answer", {"pair": 4, "value": "no"})
    after = sample.read_bytes().splitlines(keepends=True)
    assert after[4] == before[4].replace(b'"evidence":null', b'"evidence":false')
    assert after[3] == before[3] and after[:2] == before[:2] and after[5:] == before[5:]
    pair = json.loads(s.request("/api/pair/2")[1])
    assert pair["answer"] == "skip" and "evidence" not in pair
    state = json.loads(s.request("/api/state")[1])
    assert (state["answered"], state["first_unanswered"]) == (2, 0)
    assert sum(q["answered"] for q in state["queries"]) == 2


def test_a_sample_edited_while_serving_is_not_overwritten(sample: Path, serve) -> None:
    s = serve(sample)
    lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
    edited = "".join([lines[1], lines[0], *lines[2:]])
    sample.write_text(edited, encoding="utf-8")
    status, text, _ = s.request("/api/answer", {"pair": 0, "value": "yes"})
    assert status == 409 and "edited" in text
    assert sample.read_text(encoding="utf-8") == edited


def test_a_bad_sample_is_one_line_naming_it(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "q"}\n', encoding="utf-8")
    assert main(["calibrate-serve", "--sample", str(bad), "--annotator", "alice"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:1" in err and len(err.splitlines()) == 1


def test_finalize_leaves_skipped_pairs_out(sample: Path, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in sample.read_text(encoding="utf-8").splitlines()]
    for x, key in zip(lines, KEYS, strict=True):
        x["evidence"] = {"y": True, "n": False, "s": "skip"}[key]
    sample.write_text("".join(dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert finalize(sample, "alice", tmp_path / "cal.jsonl") == (5, 1)
    cal = list(read_jsonl(tmp_path / "cal.jsonl", "label"))
    skipped = (lines[2]["query_id"], lines[2]["chunk_sha"])
    assert len(cal) == 5 and skipped not in {(c["query_id"], c["chunk_sha"]) for c in cal}
    for x in lines:
        x["evidence"] = "skip"
    sample.write_text("".join(dumps(x) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(RecordError, match="all 6 pairs skipped: nothing to calibrate with"):
        finalize(sample, "alice", tmp_path / "none.jsonl")


# ---------------------------------------------------------------- in Chromium


def label(page: Any, keys: list[str], first: int) -> None:
    """Press each key on the pair shown; each must be saved before the next is shown."""
    for k, key in enumerate(keys):
        page.wait_for_selector(f"section.pair[data-i='{first + k}']")
        page.keyboard.press(key)
        # the page's CSP allows no eval: wait on the DOM, not on a script
        expect(page.locator("#progress-text")).to_have_text(f"{first + k + 1} of 6 answered")


def test_label_by_keyboard_kill_resume_finalize(sample: Path, serve, tmp_path: Path) -> None:
    """3 answers, kill -9, restart, back, finish, finalize: the same calibration file as
    answering in one go; the HTML chunk shows as text; the page fetches only its own."""
    one_go = tmp_path / "one-go.jsonl"
    one_go.write_bytes(sample.read_bytes())

    s = serve(sample)
    with browser(tmp_path / "first") as b:
        page = b.page
        page.goto(s.url)
        page.wait_for_selector("section.pair[data-i='0']")
        question = json.loads(sample.read_text(encoding="utf-8").splitlines()[0])["question"]
        assert page.locator("#question").inner_text() == question
        assert page.locator("#progress-text").inner_text() == "0 of 6 answered"
        assert page.locator(".queries li").count() == 2
        page.screenshot(path=str(tmp_path / "calibrate-first-pair.png"))
        page.keyboard.press("y")
        page.wait_for_selector("section.pair[data-i='1']")
        # the chunk holding HTML is text on the page
        assert page.locator("#chunk").inner_text() == HTML_CHUNK
        assert page.locator("#chunk *").count() == 0 and page.locator("#bold").count() == 0
        assert page.evaluate("window.pwned") is None
        page.screenshot(path=str(tmp_path / "calibrate-html-chunk.png"))
        label(page, KEYS[1:3], first=1)
        assert b.errors == [] and all(u.startswith(s.base) for u in b.requests)
    answered = [json.loads(x)["evidence"] for x in sample.read_text().splitlines()]
    assert answered == [True, False, "skip", None, None, None]
    s.stop(signal.SIGKILL)  # a crash: nothing is flushed at exit

    again = serve(sample)
    assert "6 pairs, 3 answered" in again.log.read_text(encoding="utf-8")
    assert again.token != s.token
    with browser(tmp_path / "again") as b:
        page = b.page
        page.goto(again.url)
        page.wait_for_selector("section.pair[data-i='3']")  # the first unanswered
        assert page.locator("#progress-text").inner_text() == "3 of 6 answered"
        page.keyboard.press("Backspace")
        page.wait_for_selector("section.pair[data-i='2']")
        assert page.locator("#answer").inner_text().startswith("your answer: skip")
        page.keyboard.press("s")  # the same answer again
        label(page, KEYS[3:], first=3)
        page.wait_for_selector("#done")
        command = page.locator("#finalize").inner_text()
        page.screenshot(path=str(tmp_path / "calibrate-done.png"))
        assert b.errors == []
    assert again.stop() == 0  # SIGTERM: a clean stop
    words = shlex.split(command)
    assert words[:2] == ["grumem", "calibrate-finalize"]
    assert words[words.index("--sample") + 1] == str(sample)
    assert words[words.index("--annotator") + 1] == "alice"
    subprocess.run([*GRUMEM, *words[1:]], check=True, capture_output=True, timeout=120)
    resumed = (tmp_path / "calibration.jsonl").read_bytes()

    # the same answers in one go, on a copy of the untouched sample
    (tmp_path / "calibration.jsonl").unlink()
    s = serve(one_go)
    with browser(tmp_path / "one-go") as b:
        b.page.goto(s.url)
        label(b.page, KEYS, first=0)
        b.page.wait_for_selector("#done")
    subprocess.run(
        [*GRUMEM, "calibrate-finalize", "--sample", str(one_go), "--annotator", "alice",
         "--out", str(tmp_path / "calibration.jsonl")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert (tmp_path / "calibration.jsonl").read_bytes() == resumed
    assert one_go.read_bytes() == sample.read_bytes()
    assert len(list(read_jsonl(tmp_path / "calibration.jsonl", "label"))) == 5
    assert os.path.getsize(tmp_path / "calibration.jsonl") > 0


def test_the_page_refuses_without_the_token_in_the_browser(
    sample: Path, serve, tmp_path: Path
) -> None:
    s = serve(sample)
    with browser(tmp_path) as b:
        response = b.page.goto(s.base + "/")
        assert response.status == 403
        assert "token is missing or wrong" in b.page.inner_text("body")
        assert b.page.locator("#question").count() == 0
