"""The corpus plots (grumem.stages.report_plots, computed by grumem.report.corpus_charts)
and the Snakemake report that shows them.

Fast: the bars matplotlib draws of a small synthetic log and corpus equal
counts made by hand. Slow: the demo project through the real `snakemake`
command against the fake server, `snakemake --report report.html`, then the
report opened in headless Chromium: a screenshot, the rendered DOM, the plots
shown by the report's own app (DevTools protocol on 127.0.0.1), and the
numbers of the embedded plots checked against the corpus.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from matplotlib.container import BarContainer

from grumem.cli import main
from grumem.core.json_text import dumps, sha256_text
from grumem.report.corpus_charts import LATENCY_EDGES, PLOTS
from grumem.report.plots import HEIGHT_IN, WIDTH_IN, BarChart, figure, render_svg
from grumem.report.viewer import VIEWER
from grumem.stages.report_plots import charts, write_plots
from support.browser import CHROMIUM_FLAGS, browser, chromium
from support.workflow import REPO, read_lines, snakemake, write_config

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"
VIEWER_PATH = f"results/demo/report/{VIEWER}"

# ---------------------------------------------------------------- synthetic inputs


def log_line(
    tid: str, t: int, parsed: bool = True, latency: float = 0.3, aborted: bool = False
) -> dict[str, Any]:
    """A log line valid against workflow/schemas/log.schema.yaml."""
    body = dumps({"model": "m", "messages": [{"role": "user", "content": f"{tid} {t}"}]})
    gate = {"update_gate": False, "exit_gate": False} if parsed else {}
    return {
        "trajectory_id": tid,
        "project": "p",
        "query_id": "q",
        "session": tid,
        "sample": 0,
        "level": "L1",
        "model": "m",
        "t": t,
        "chunk_sha": sha256_text(f"{tid}/{t}"),
        "status": "aborted" if aborted else "ok",
        "abort": {"reason": "budget", "component": "memory", "detail": "over"} if aborted else None,
        "asks": 0 if aborted else 1,
        "earlier_asks": [],
        "memory_before": None,
        "memory_after": None,
        "request": None if aborted else {"body": body, "sha256": sha256_text(body)},
        "response": None
        if aborted
        else {
            "attempt": 1,
            "status": 200,
            "body": "{}",
            "sha256": sha256_text("{}"),
            "latency_s": latency,
            "error": None,
        },
        "content": None,
        "finish_reason": None,
        "parsed": parsed and not aborted,
        "update_gate": gate.get("update_gate"),
        "exit_gate": gate.get("exit_gate"),
        "candidate": None,
        "think": None,
        "parse_error": None,
    }


def trajectory(tid: str, r_updates: list[int], t_last_evidence: int | None) -> dict[str, Any]:
    """A corpus line valid against workflow/schemas/trajectory.schema.yaml."""
    turns = [
        {
            "t": t,
            "prompt": [{"role": "user", "content": "x"}],
            "response": "r",
            "r_update": r,
            "parsed": True,
            "chunk_sha": sha256_text(f"{tid}/{t}"),
            "label": False,
            "update_gate": r == 1,
            "exit_gate": False,
            "attempt": 1,
            "asks": 1,
            "earlier_asks": [],
            "request_sha256": sha256_text(f"req {tid}/{t}"),
            "response_model": "fake-model",
            # a group of one sample: no advantages (the export says why in its summary)
            "advantage": None,
            "advantage_traj": None,
            "advantage_turn": None,
        }
        for t, r in enumerate(r_updates, start=1)
    ]
    return {
        "trajectory_id": tid,
        "turns": turns,
        "r_exit": None,
        "r_exit_reason": "no_evidence",
        "r_format": 1,
        "r_outcome": None,
        "t_exit": len(turns),
        "t_last_evidence": t_last_evidence,
        "project": "p",
        "query_id": "q",
        "session": tid,
        "sample": 0,
        "level": "L1",
        "model": "m",
        "split": "train",
        "aborted": None,
    }


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def plotted(chart: BarChart) -> dict[tuple[str, str], float]:
    """(series, category) -> the height of every bar matplotlib drew for `chart`."""
    ax = figure(chart).axes[0]
    out = {}
    for container in ax.containers:
        if not isinstance(container, BarContainer):
            continue
        for category, bar in zip(chart.categories, container.patches, strict=True):
            key = (container.get_label(), category)
            assert key not in out, f"two bars for {key}"
            out[key] = bar.get_height()
    return out


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, Path]:
    # three trajectories; hand counts in the test below
    corpus = [
        trajectory("a", [1, -1, 1], 2),
        trajectory("b", [-1, -1], None),
        trajectory("c", [1, 1, 1, -1], 4),
    ]
    log = [
        log_line("a", 1, latency=0.0005),
        log_line("a", 2, parsed=False, latency=0.001),
        log_line("a", 3, latency=0.3),
        log_line("b", 1, latency=0.3),
        log_line("b", 2, parsed=False, latency=1500.0),
        log_line("b", 3, aborted=True),
        log_line("c", 1, latency=0.25),
        log_line("c", 2, latency=12.0),
        log_line("c", 3, latency=12.5),
        log_line("c", 4, parsed=False, latency=19.99),
    ]
    return write_lines(tmp_path / "log.jsonl", log), write_lines(tmp_path / "traj.jsonl", corpus)


# ---------------------------------------------------------------- fast tests


def test_bars_equal_hand_counts(synthetic: tuple[Path, Path]) -> None:
    log, corpus = synthetic
    r_chart, e_chart, p_chart, lat_chart = charts(log, corpus)
    assert [f"{c.name}.svg" for c in charts(log, corpus)] == list(PLOTS)

    # r_update: t=1 a+ b- c+, t=2 a- b- c+, t=3 a+ c+, t=4 c-
    r = plotted(r_chart)
    pos = {t: r[("r_update +1", str(t))] for t in range(1, 5)}
    neg = {t: r[("r_update -1", str(t))] for t in range(1, 5)}
    assert pos == {1: 2, 2: 1, 3: 2, 4: 0}
    assert neg == {1: 1, 2: 2, 3: 0, 4: 1}
    assert len(r) == 8
    assert r_chart.subtitle == "9 turns in 3 trajectories: +1 5 (55.6%), -1 4 (44.4%)"

    # t_last_evidence: 2 (a), 4 (c), none (b); the axis starts at t=1
    assert plotted(e_chart) == {
        ("trajectories", "1"): 0,
        ("trajectories", "2"): 1,
        ("trajectories", "3"): 0,
        ("trajectories", "4"): 1,
        ("trajectories", "none"): 1,
    }

    # parse rate over answered turns: t=1 3/3, t=2 1/3 (a, b unparsed), t=3 2/2
    # (b's t=3 is an abort: not counted), t=4 0/1
    assert plotted(p_chart) == {
        ("parse rate", "1"): 1.0,
        ("parse rate", "2"): pytest.approx(1 / 3),
        ("parse rate", "3"): 1.0,
        ("parse rate", "4"): 0.0,
    }
    assert p_chart.subtitle == ("6 of 9 answered turns parsed (66.7%); 1 aborted turns not counted")
    assert p_chart.y_max == 1.0

    # latency: 0.5 ms below 1 ms; 1 ms in [1ms, 2ms); 0.25 and 0.3 x2 in
    # [200ms, 500ms); 12, 12.5, 19.99 in [10s, 20s); 1500 s at 1000 s or more.
    # Bins between are shown empty, from the first used to the last used.
    lat = plotted(lat_chart)
    assert lat[("turns", "<1ms")] == 1
    assert lat[("turns", "1ms")] == 1
    assert lat[("turns", "200ms")] == 3
    assert lat[("turns", "10s")] == 3
    assert lat[("turns", "≥1000s")] == 1
    assert sum(lat.values()) == 9
    assert len(lat) == len(LATENCY_EDGES) + 1  # every bin, from below 1 ms to 1000 s or more
    assert lat[("turns", "500ms")] == 0


def test_the_files_are_the_charts_rendered(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    log, corpus = synthetic
    paths = write_plots(log, corpus, tmp_path / "plots")
    assert [p.name for p in paths] == list(PLOTS)
    for path, chart in zip(paths, charts(log, corpus), strict=True):
        assert path.read_text(encoding="utf-8") == render_svg(chart)
    again = [p.read_bytes() for p in write_plots(log, corpus, tmp_path / "again")]
    assert again == [p.read_bytes() for p in paths]


def test_cli_writes_the_plots_and_names_a_bad_line(
    synthetic: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    log, corpus = synthetic
    out = tmp_path / "cli"
    args = [
        "report-plots",
        "--turn-log",
        str(log),
        "--trajectories",
        str(corpus),
        "--out-dir",
        str(out),
    ]
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(PLOTS)

    lines = log.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[3])
    bad["t"] = "two"
    lines[3] = dumps(bad)
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = log.read_bytes()
    assert main([*args[:-1], str(tmp_path / "cli2")]) == 1
    err = capsys.readouterr().err
    assert f"{log}:4" in err and "t" in err
    assert log.read_bytes() == before  # the error goes to stderr, never into an input
    assert not (tmp_path / "cli2").exists() or not any((tmp_path / "cli2").iterdir())


# ---------------------------------------------------------------- the report in Chromium


def run_chromium(exe: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{time.monotonic_ns()}"
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def embedded(dom: str, name: str) -> Any:
    """A `var <name> = {...}` JSON object of the report's scripts."""
    start = dom.index(f"var {name} = {{") + len(f"var {name} = ")
    return json.JSONDecoder().raw_decode(dom, start)[0]


def data_uri_bytes(uri: str) -> bytes:
    head, _, data = uri.partition(",")
    return (
        base64.b64decode(data) if head.endswith(";base64") else urllib.parse.unquote_to_bytes(data)
    )


class DevTools:
    """A page of a headless Chromium, driven over the DevTools protocol on 127.0.0.1."""

    def __init__(self, exe: str, tmp: Path, url: str):
        self.profile = tmp / "devtools-profile"
        self.stderr = open(tmp / "chromium.stderr", "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [
                exe,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1400,1000",
                url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            stdin=subprocess.DEVNULL,
        )
        self.next_id = 0

    def port(self) -> int:
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            assert self.proc.poll() is None, "chromium exited before it listened"
            time.sleep(0.1)
        raise AssertionError("chromium wrote no DevToolsActivePort within 60 s")

    async def call(self, ws: Any, method: str, **params: Any) -> dict:
        self.next_id += 1
        await ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(ws.receive_json(), 60)
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg["result"]

    async def evaluate(self, ws: Any, expression: str) -> Any:
        result = await self.call(
            ws, "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def wait_for(self, ws: Any, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = await self.evaluate(ws, expression)
            if value:
                return value
            await asyncio.sleep(0.1)
        raise AssertionError(f"never true in the page: {expression}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


async def show_plots_in_report(
    dev: DevTools, captions: dict[str, str], shots: Path
) -> dict[str, Any]:
    """Open each plot (path -> caption) through the report's own app; what the page shows."""
    import aiohttp

    port = dev.port()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            pages = [t for t in await resp.json() if t["type"] == "page"]
        async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            await dev.wait_for(
                ws, "typeof app !== 'undefined' && document.readyState == 'complete'"
            )
            await dev.evaluate(ws, "app.showCategory('Corpus')")
            listing = await dev.wait_for(
                ws,
                "document.body.innerText.includes('parse rate per t') && document.body.innerText",
            )
            seen: dict[str, Any] = {"listing": listing}
            for path, caption in captions.items():
                p = json.dumps(path)
                await dev.evaluate(ws, f"app.showResultInfo({p})")
                info = await dev.wait_for(
                    ws,
                    f"document.body.innerText.includes({json.dumps(caption)})"
                    " && document.body.innerText",
                )
                await dev.evaluate(
                    ws,
                    f"app.setView({{content: 'img', contentPath: results[{p}].data_uri,"
                    f" resultPath: {p}}})",
                )
                size = await dev.wait_for(
                    ws,
                    "(() => { const i = [...document.querySelectorAll('img')]"
                    f".find(i => i.src === results[{p}].data_uri);"
                    " return i && i.complete && i.naturalWidth > 0"
                    " && [i.naturalWidth, i.naturalHeight]; })()",
                )
                shot = await dev.call(ws, "Page.captureScreenshot", format="png")
                png = shots / (Path(path).stem + ".png")
                png.write_bytes(base64.b64decode(shot["data"]))
                seen[path] = {"info": info, "size": size, "png": png}
    return seen


def hand_counts(log: list[dict], corpus: list[dict]) -> dict[str, Counter]:
    """The plotted numbers, counted here without grumem.report.corpus_charts."""
    c: dict[str, Counter] = {k: Counter() for k in ("pos", "neg", "evidence", "answered", "parsed")}
    for traj in corpus:
        c["evidence"][traj["t_last_evidence"] or "none"] += 1
        for turn in traj["turns"]:
            c["pos" if turn["r_update"] == 1 else "neg"][turn["t"]] += 1
    for line in log:
        if line["status"] == "ok":
            c["answered"][line["t"]] += 1
            c["parsed"][line["t"]] += line["parsed"]
    return c


@pytest.mark.slow
def test_report_renders_the_corpus_plots_in_chromium(tmp_path: Path, fake_server) -> None:
    """The demo workflow's report: plots embedded with captions, rendered by Chromium."""
    exe = chromium()
    server = fake_server(FAKE_DEMO)
    work = tmp_path / "work"
    work.mkdir()
    write_config(work, server.base_url)
    targets = [f"results/demo/report/{name}" for name in (*PLOTS, VIEWER)]
    snakemake(work, "all", *targets)
    snakemake(work, "--report", "report.html", "all", *targets)
    report = work / "report.html"
    assert report.stat().st_size > 0

    # the page as Chromium renders it: a screenshot and the DOM after its scripts ran
    shot = tmp_path / "report.png"
    run_chromium(exe, tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", report.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    dom = run_chromium(exe, tmp_path, "--dump-dom", report.as_uri()).stdout
    assert "prose prose-sm" in dom  # the app rendered workflow.rst: its scripts ran
    assert "grumem runs the GRU-Mem gated recurrent memory agent" in dom

    categories = embedded(dom, "categories")
    results = embedded(dom, "results")
    paths = [f"results/demo/report/{name}" for name in PLOTS]
    assert sorted(categories["Corpus"]["demo"]) == sorted([*paths, VIEWER_PATH])
    captions = {
        "r_update_by_t.svg": "r_update per trajectory position t",
        "t_last_evidence.svg": "t_last_evidence per trajectory",
        "parse_rate_by_t.svg": "Parse rate per turn index t",
        "latency.svg": "Latency of the answered turns",
    }
    svgs = {}
    for path in paths:
        entry = results[path]
        name = Path(path).name
        assert entry["mime_type"] == "image/svg+xml"
        assert captions[name] in entry["caption"] and "<tt" in entry["caption"]
        assert entry["job_properties"]["rule"] == "report_plots"
        svgs[name] = data_uri_bytes(entry["data_uri"]).decode("utf-8")
        assert svgs[name] == (work / path).read_text(encoding="utf-8")

    # the embedded plots show the corpus: the numbers handed to matplotlib equal
    # counts made from its files, and the embedded SVG is what it drew of them
    log_path = work / "results/demo/log.jsonl"
    corpus_path = work / "results/demo/corpus/trajectories.jsonl"
    hand = hand_counts(read_lines(log_path), read_lines(corpus_path))
    drawn = {f"{c.name}.svg": c for c in charts(log_path, corpus_path)}
    for name, chart in drawn.items():
        assert svgs[name] == render_svg(chart)
    r = plotted(drawn["r_update_by_t.svg"])
    for t in range(1, max(hand["pos"] | hand["neg"]) + 1):
        assert r[("r_update +1", str(t))] == hand["pos"][t]
        assert r[("r_update -1", str(t))] == hand["neg"][t]
    e = plotted(drawn["t_last_evidence.svg"])
    assert {k[1]: v for k, v in e.items() if v} == {str(k): v for k, v in hand["evidence"].items()}
    p = plotted(drawn["parse_rate_by_t.svg"])
    for t, n in hand["answered"].items():
        assert p[("parse rate", str(t))] == pytest.approx(hand["parsed"][t] / n)
    lat = plotted(drawn["latency.svg"])
    assert sum(lat.values()) == sum(hand["answered"].values()) > 0

    # the report's own app shows each plot: listed under Corpus with its label,
    # its caption in the info panel, and the SVG decoded at its full size
    dev = DevTools(exe, tmp_path, report.as_uri())
    try:
        seen = asyncio.run(
            show_plots_in_report(dev, {p: captions[Path(p).name] for p in paths}, tmp_path)
        )
    finally:
        dev.close()
    for label in ("r_update per t", "t_last_evidence", "parse rate per t", "latency", "demo"):
        assert label in seen["listing"]
    for path in paths:
        # matplotlib's SVG is sized in points, 72 to the inch; Chromium shows 96 px an inch
        assert seen[path]["size"] == [round(WIDTH_IN * 96), round(HEIGHT_IN * 96)]
        assert captions[Path(path).name] in seen[path]["info"]
        assert seen[path]["png"].stat().st_size > 10_000

    # the trajectory viewer: in the report under Corpus, the file's bytes, small enough
    # for Chromium to show as the report's data: URL, and working inside the report
    entry = results[VIEWER_PATH]
    assert entry["mime_type"] == "text/html"
    assert "The trajectory viewer of project" in entry["caption"]
    assert entry["job_properties"]["rule"] == "report_viewer"
    assert data_uri_bytes(entry["data_uri"]) == (work / VIEWER_PATH).read_bytes()
    assert len(entry["data_uri"]) < 2 * 1024 * 1024  # Chromium shows no longer data: URL
    with browser(tmp_path / "viewer") as b:
        b.page.goto(report.as_uri())
        b.page.wait_for_function("typeof app !== 'undefined'")
        b.page.evaluate(
            f"app.setView({{content: 'html', contentPath: results[{json.dumps(VIEWER_PATH)}]"
            f".data_uri, resultPath: {json.dumps(VIEWER_PATH)}}})"
        )
        frame = b.page.frame_locator("iframe")
        frame.locator("tr.row").first.wait_for()
        corpus_lines = read_lines(corpus_path)
        assert frame.locator("tr.row").count() == len(corpus_lines) == 10
        first = corpus_lines[0]
        frame.locator(f"tr.row[data-id='{first['trajectory_id']}'] a.open").click()
        frame.locator("section.turn").first.wait_for()
        assert frame.locator("section.turn").count() == len(first["turns"])
        assert frame.locator(".exit-mark").count() == 1
        b.page.screenshot(path=str(tmp_path / "report-viewer.png"), full_page=True)
        # the report's own page warns of its Tailwind build; nothing else is said
        assert [e for e in b.errors if "cdn.tailwindcss.com should not be" not in e] == []
