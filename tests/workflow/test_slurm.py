"""The SLURM profile, proven on a real one-node SLURM cluster on this machine.

The slow tests install Debian's slurm and munge (scripts/slurm_cluster.sh
install), start munged, slurmctld and slurmd, submit workflows through
workflow/profiles/slurm and stop every daemon they started at the end, also
when a test fails. They need root and apt-get and are skipped without them.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from support.checkout import REPO_ROOT

CLUSTER_SCRIPT = REPO_ROOT / "scripts" / "slurm_cluster.sh"
SLURM_PROFILE = REPO_ROOT / "workflow" / "profiles" / "slurm"
DEFAULT_PROFILE = REPO_ROOT / "workflow" / "profiles" / "default"
SMOKE_SNAKEFILE = REPO_ROOT / "tests" / "slurm_smoke" / "Snakefile"
WORKFLOW_SNAKEFILE = REPO_ROOT / "Snakefile"
# The cluster script's MinJobAge: how long squeue still lists a finished job.
CLUSTER_MIN_JOB_AGE_S = 300
# One cluster per machine (fixed ports, /run/munge): concurrent pytest sessions
# take turns, or one session's teardown would stop the other's cluster mid-run.
# The lock is machine-wide like the cluster, kept in /run/lock (not /tmp, which
# the suite leaves as it found it).
CLUSTER_LOCK = Path("/run/lock/grumem-slurm-tests.lock")
CLUSTER_LOCK_WAIT_S = 600
SUBMITTED_RE = re.compile(r"has been submitted with SLURM jobid (\d+)")
# sbatch submissions of the demo without job groups, as SUBMITTED_RE counts them: one
# per job but `all` (sessions, 2 x prompts, 2 x responses, 2 x gates, log, kappa,
# export_project, report_plots).
DEMO_SUBMISSIONS_UNGROUPED = 11


def _load_profile(profile: Path) -> dict:
    return yaml.safe_load((profile / "config.yaml").read_text(encoding="utf-8"))


def _cluster(command: str, *, timeout: float, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    print(proc.stdout, proc.stderr, sep="", end="")
    if check and proc.returncode != 0:
        pytest.fail(
            f"slurm_cluster.sh {command} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def _slurm_conf() -> str:
    """SLURM_CONF for clients, as the cluster script reports it (`env`)."""
    out = _cluster("env", timeout=10).stdout.strip()
    match = re.fullmatch(r"export SLURM_CONF=(\S+)", out)
    assert match, f"unexpected `slurm_cluster.sh env` output: {out!r}"
    return match.group(1)


def run_snakemake_on_slurm(
    workdir: Path,
    targets: Sequence[str] = (),
    *,
    snakefile: Path = WORKFLOW_SNAKEFILE,
    profile: Path = SLURM_PROFILE,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """Run `snakemake TARGETS` in WORKDIR through PROFILE (SLURM's); stdout and stderr merged.

    Jobs on the node run this interpreter's snakemake by absolute path, which
    exists there because the node is this machine. The cluster must be up
    (the `slurm_cluster` fixture) and `env` must carry its SLURM_CONF.
    """
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(snakefile),
        "--workflow-profile",
        str(profile),
        "--directory",
        str(workdir),
        *extra_args,
        *targets,
    ]
    return subprocess.run(
        cmd,
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


def _dry_run(
    snakefile: Path, profile: Path, workdir: Path, *targets: str
) -> subprocess.CompletedProcess:
    """`snakemake --dry-run` through PROFILE: no cluster needed."""
    return run_snakemake_on_slurm(
        workdir, targets, snakefile=snakefile, profile=profile, extra_args=["--dry-run"]
    )


def _squeue_states(env: dict[str, str]) -> dict[str, str]:
    """Job id -> state of every job slurmctld still remembers (finished ones for MinJobAge)."""
    out = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%T"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line.strip())


@contextmanager
def _cluster_lock() -> Iterator[None]:
    """Hold the machine-wide lock on the test cluster (waits for another session)."""
    with CLUSTER_LOCK.open("w") as fh:
        deadline = time.monotonic() + CLUSTER_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"another test session held {CLUSTER_LOCK} > {CLUSTER_LOCK_WAIT_S}s"
                    )
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[dict[str, str]]:
    """A running one-node cluster; yields the environment for its clients.

    Stops at teardown whatever it started; a cluster that was already up
    before the tests is used and left running.
    """
    if os.geteuid() != 0:
        pytest.skip("needs root: installs Debian's slurm and munge and starts their daemons")
    if shutil.which("apt-get") is None:
        pytest.skip("apt-get not found: cannot install Debian's slurm and munge here")
    with _cluster_lock():
        yield from _running_cluster()


def _running_cluster() -> Iterator[dict[str, str]]:
    t0 = time.monotonic()
    _cluster("install", timeout=900)
    t1 = time.monotonic()
    already_up = (
        shutil.which("sinfo") is not None
        and _cluster("status", timeout=30, check=False).returncode == 0
    )
    try:
        _cluster("start", timeout=180)
        t2 = time.monotonic()
        print(f"slurm install {t1 - t0:.1f} s, cluster start {t2 - t1:.1f} s")
        yield {**os.environ, "SLURM_CONF": _slurm_conf()}
    finally:
        if not already_up:
            _cluster("stop", timeout=120)


@pytest.mark.slow
def test_profiles_are_accepted_by_snakemake(tmp_path: Path) -> None:
    """Both profiles parse, name the options the plugin knows, and pass a dry run."""
    slurm = _load_profile(SLURM_PROFILE)
    assert slurm["executor"] == "slurm"
    assert {"slurm_partition", "runtime", "mem_mb"} <= set(slurm["default-resources"])
    # llm_slots is a global resource (a cap across jobs), never a per-job default.
    assert "llm_slots" in slurm["resources"]
    assert "llm_slots" not in slurm["default-resources"]
    # A group job runs its jobs one at a time on the node: at cores 1 it asks
    # for 1 CPU and the sum of their runtimes, not the width of a parallel layer.
    assert slurm["cores"] == 1
    # Without an accounting database sacct fails and the run hangs: poll squeue,
    # which the plugin only does while MinJobAge >= 3 x the first check delay.
    assert slurm["slurm-status-command"] == "squeue"
    assert 3 * slurm["slurm-init-seconds-before-status-checks"] <= CLUSTER_MIN_JOB_AGE_S
    default = _load_profile(DEFAULT_PROFILE)
    assert "llm_slots" in default["resources"]
    assert "executor" not in default
    for profile in (SLURM_PROFILE, DEFAULT_PROFILE):
        proc = _dry_run(SMOKE_SNAKEFILE, profile, tmp_path)
        assert proc.returncode == 0, f"{profile.name}:\n{proc.stdout}"
        assert "llm_slots=1" in proc.stdout, proc.stdout


def _group_jobs(dry_run_output: str) -> dict[str, int]:
    """Group name -> group jobs in a dry run's plan."""
    return dict(Counter(re.findall(r"Group job (\S+) \(jobs", dry_run_output)))


@pytest.mark.slow
def test_slurm_profile_groups_small_jobs(tmp_path: Path) -> None:
    """Through the SLURM profile (a dry run: no cluster needed) 4 shards' prompts,
    responses and gates are one group job, 8 shards' chunk jobs another, and a
    project's log, kappa, export and plots a third."""
    from support.workflow import demo_project, write_config

    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    for i in range(20):
        (transcripts / f"session-{i:02d}.jsonl").write_text(
            f'{{"role": "user", "text": "question {i}"}}\n'
            f'{{"role": "assistant", "text": "answer {i}"}}\n',
            encoding="utf-8",
        )
    project = demo_project(transcripts={"glob": str(transcripts / "*.jsonl"), "format": "records"})
    del project["chunks"]
    work = tmp_path / "work"
    work.mkdir()
    # 20 transcripts, 2 to a shard: 10 shards, in ceil(10 / 8) = 2 chunk group jobs
    # and ceil(10 / 4) = 3 rollout group jobs (the sorted rule: exactly 2 to a shard)
    write_config(
        work,
        "http://127.0.0.1:9/v1",
        projects={"talks": project},
        shard_size=2,
        shard_rule="sorted",
    )
    proc = _dry_run(WORKFLOW_SNAKEFILE, SLURM_PROFILE, work, "all")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert _group_jobs(proc.stdout) == {"chunk": 2, "rollout": 3, "corpus": 1}, proc.stdout
    # every job but sessions and all (a localrule) is in a group
    plan = proc.stdout.split("Job stats:")[1]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", plan, flags=re.MULTILINE))
    assert counts == {
        "chunk": "10",
        "sessions": "1",
        "prompts": "10",
        "responses": "10",
        "gates": "10",
        "log": "1",
        "kappa": "1",
        "export_project": "1",
        "report_plots": "1",
        "report_viewer": "1",
        "all": "1",
        "total": "47",
    }, plan


@pytest.mark.slow
def test_smoke_workflow_runs_through_slurm(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """Every job of the smoke workflow is an sbatch job that SLURM ran to COMPLETED."""
    t0 = time.monotonic()
    proc = run_snakemake_on_slurm(
        tmp_path,
        snakefile=SMOKE_SNAKEFILE,
        # SLURM's own log per job, named by its job id, kept as evidence.
        extra_args=["--slurm-keep-successful-logs"],
        env=slurm_cluster,
        timeout=300,
    )
    print(f"smoke run through SLURM: {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, proc.stdout

    merged = (tmp_path / "results" / "merged.txt").read_text(encoding="utf-8").splitlines()
    assert [line.split()[0] for line in merged] == ["part=1", "part=2", "merge"]
    # Each job wrote the SLURM job id it ran under: three distinct real ids.
    ran_under = [line.split("slurm_job_id=")[1] for line in merged]
    assert all(job_id.isdigit() for job_id in ran_under), merged
    assert len(set(ran_under)) == 3, merged

    submitted = SUBMITTED_RE.findall(proc.stdout)
    assert sorted(submitted) == sorted(ran_under), proc.stdout
    states = _squeue_states(slurm_cluster)
    assert all(states.get(job_id) == "COMPLETED" for job_id in ran_under), states
    logs = tmp_path / ".snakemake" / "slurm_logs"
    assert {p.stem for p in logs.rglob("*.log")} == set(ran_under)


@pytest.mark.slow
def test_failing_job_is_reported_failed(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """A rule exiting non-zero on the node fails the run, named, with SLURM's FAILED state."""
    proc = run_snakemake_on_slurm(
        tmp_path,
        ["results/fail.txt"],
        snakefile=SMOKE_SNAKEFILE,
        env=slurm_cluster,
        timeout=300,
    )
    assert proc.returncode != 0, proc.stdout
    assert "Error in rule fail" in proc.stdout, proc.stdout
    (job_id,) = SUBMITTED_RE.findall(proc.stdout)
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'FAILED'" in proc.stdout
    assert _squeue_states(slurm_cluster)[job_id] == "FAILED"
    assert not (tmp_path / "results" / "fail.txt").exists()
    # The rule really ran on the node (its log) and SLURM kept the failed job's log.
    assert "exits 3 on purpose" in (tmp_path / "logs" / "fail.log").read_text(encoding="utf-8")
    assert (tmp_path / ".snakemake" / "slurm_logs" / "rule_fail" / f"{job_id}.log").is_file()


@pytest.mark.slow
def test_demo_export_on_slurm_matches_local(
    slurm_cluster: dict[str, str], tmp_path: Path, fake_server
) -> None:
    """The demo corpus built through SLURM equals the local build byte for byte,
    in a third of the cluster jobs it took before job groups.

    Both runs talk to the same fake LLM server with caches of their own, so
    each really sends its requests; only recorded latencies may differ, and
    they reach the corpus only through the log's sha256 in summary.json."""
    from support.workflow import read_lines, snakemake, write_config

    server = fake_server(REPO_ROOT / "fixtures" / "fake" / "demo.yaml")
    local, cluster = tmp_path / "local", tmp_path / "slurm"
    for work in (local, cluster):
        work.mkdir()
        write_config(work, server.base_url)
    snakemake(local, "--workflow-profile", str(DEFAULT_PROFILE), "all")
    sent_locally = server.stats()["requests"]
    proc = run_snakemake_on_slurm(cluster, ["all"], env=slurm_cluster, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:]
    submitted = SUBMITTED_RE.findall(proc.stdout)
    print(f"demo sbatch submissions: {len(submitted)}, ungrouped {DEMO_SUBMISSIONS_UNGROUPED}")
    assert submitted, "no job went through SLURM"
    # Job groups: both shards' prompts, responses and gates are one cluster job, the
    # project's log, kappa, export and plots another, the sessions index a third.
    assert 3 * len(submitted) <= DEMO_SUBMISSIONS_UNGROUPED, proc.stdout[-6000:]
    assert proc.stdout.count("Group job rollout") == 1, proc.stdout[-6000:]
    assert proc.stdout.count("Group job corpus") == 1, proc.stdout[-6000:]
    assert len(submitted) == 3, proc.stdout[-6000:]
    assert server.stats()["requests"] == 2 * sent_locally == 144

    corpus = Path("results/demo/corpus")
    for name in ("trajectories.jsonl", "turns.parquet"):
        assert (cluster / corpus / name).read_bytes() == (local / corpus / name).read_bytes(), name
    summaries = [
        yaml.safe_load((w / corpus / "summary.json").read_text()) for w in (local, cluster)
    ]
    for s in summaries:
        s["inputs"].pop("log_sha256")
    assert summaries[0] == summaries[1]

    def untimed(work: Path) -> list[dict]:
        lines = read_lines(work / "results/demo/log.jsonl")
        for line in lines:
            line["response"].pop("latency_s")
        return lines

    assert untimed(local) == untimed(cluster)


@pytest.mark.slow
def test_a_user_config_runs_only_its_projects_in_the_cluster_jobs(
    slurm_cluster: dict[str, str], tmp_path: Path, fake_server
) -> None:
    """`snakemake --configfile mine.yaml` through SLURM, in a directory that also holds
    the demo's config.yaml: the main job plans only the user's project, and so do the
    cluster jobs, which Snakemake starts again on the node with the main job's config
    files (a job that read the demo's config would not know project `mine`)."""
    from support.workflow import demo_project, write_config, write_queries, write_session

    server = fake_server(REPO_ROOT / "fixtures" / "fake" / "demo.yaml")
    work = tmp_path / "work"
    work.mkdir()
    write_config(work, server.base_url)  # the demo, as `snakemake` alone would read it
    chunks = tmp_path / "mine"
    chunks.mkdir()
    write_session(chunks / "s.jsonl", "s", ["an error", "fixed"])
    write_queries(tmp_path / "q.yaml")
    mine = demo_project(chunks=str(chunks / "*.jsonl"), queries=str(tmp_path / "q.yaml"))
    # what mine.yaml leaves out takes the schema's defaults, not the demo's values
    # (max_tokens 512, not the 256 of the demo's config.yaml here)
    config = {
        "projects": {"mine": mine},
        "llm": {"base_url": server.base_url, "model": "fake-model"},
    }
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = run_snakemake_on_slurm(
        work,
        ["results/mine/log.jsonl"],
        extra_args=[f"--configfile={tmp_path / 'mine.yaml'}", "--slurm-keep-successful-logs"],
        env=slurm_cluster,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    submitted = SUBMITTED_RE.findall(proc.stdout)
    # the session index, the shard's rollout group, the log: each an sbatch job
    assert len(submitted) == 3, proc.stdout[-6000:]
    log = (work / "results/mine/log.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(log) == 2 and server.stats()["requests"] == 2
    assert not (work / "results/demo").exists()
    # each cluster job was given the user's file, and no other
    job_logs = sorted((work / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert {p.stem for p in job_logs} == set(submitted)
    for job_log in job_logs:
        text = job_log.read_text(encoding="utf-8")
        assert f"--configfiles {tmp_path / 'mine.yaml'} --" in text, text
        assert "config.yaml" not in text, text
    rollout = next(p.read_text(encoding="utf-8") for p in job_logs if "rollout" in str(p))
    assert '"max_tokens": 512' in rollout and '"max_tokens": 256' not in rollout, rollout
