"""`grumem discover`: the agent logs on this machine, found where each tool keeps them.

Every format that lists `LOCATIONS` (the built-ins and the plugins; see
grumem.core.locations) is looked for in each of its places, on Linux and macOS
layouts alike. Per format it prints the globs that matched, the sessions (a file
each, the subagents its reader splits off counted with it, or what the format's
`count_sessions` counts: a store's rows, as of its last checkpoint), their size
and their first and last dates (the files' modification times). Nothing is copied
and no transcript is read: a glob lists names, a file is only stat'ed, and a store
is opened only by its format's read-only count.

`--write FILE` writes a config with one project per place found (glob and
format), which `snakemake --configfile FILE` runs as it is: beside FILE, a starter
`queries.yaml` (two questions) and, per project, an empty calibration file, each
only when absent. The labels come from the LLM judge; the export is refused until
a person has labelled a sample into the calibration file (docs/judge.md), as for
any project: an empty calibration has no pair to compute κ from.
"""

from __future__ import annotations

import argparse
import copy
import glob
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from grumem.config.settings import validate_config
from grumem.core.locations import expand_location
from grumem.errors import GrumemError
from grumem.io.jsonl import atomic_writer
from grumem.transcripts import all_formats

STARTER_QUERIES = """\
# Standing questions, asked of every session (workflow/schemas/queries.schema.yaml).
# Written by `grumem discover --write`: edit them to what you want the memory to keep.
queries:
  - id: errors-and-fixes
    question: Which errors did the agent hit, and what fixed each one?
  - id: environment
    question: >-
      What must a future agent know about this project's environment and tooling
      that it could not guess (versions, hosts, paths, environment variables,
      required commands or flags)?
"""


@dataclass
class Found:
    """The files one glob of a format matched."""

    format: str
    glob: str
    files: int = 0
    sessions: int = 0
    size: int = 0
    first: float | None = None
    last: float | None = None
    uncounted: int = 0  # stores whose sessions only the reader could count: one each

    def add(self, path: str, st: os.stat_result, sessions: int | None) -> None:
        self.files += 1
        self.size += st.st_size
        if sessions is None:
            self.uncounted += 1
            sessions = 1
        self.sessions += sessions
        self.first = st.st_mtime if self.first is None else min(self.first, st.st_mtime)
        self.last = st.st_mtime if self.last is None else max(self.last, st.st_mtime)


@dataclass
class Discovery:
    found: list[Found] = field(default_factory=list)
    looked: dict[str, list[str]] = field(default_factory=dict)  # format -> globs tried
    no_place: list[str] = field(default_factory=list)  # formats without LOCATIONS


def discover(home: str, env: dict[str, str]) -> Discovery:
    """Every format's locations under `home` (with `env`'s overrides), globbed."""
    result = Discovery()
    for name, module in all_formats().items():
        locations = getattr(module, "LOCATIONS", ())
        if not locations:
            result.no_place.append(name)
            continue
        count = getattr(module, "count_sessions", None)
        globs = [g for loc in locations for g in expand_location(loc, home, env)]
        result.looked[name] = list(dict.fromkeys(globs))
        for pattern in result.looked[name]:
            found = Found(name, pattern)
            for path in sorted(glob.glob(pattern)):
                try:
                    st = os.stat(path)
                except OSError:  # gone since the glob listed it
                    continue
                if not os.path.isfile(path):
                    continue
                found.add(path, st, count(path) if count is not None else 1)
            if found.files:
                result.found.append(found)
    return result


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def day(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")


def report(d: Discovery, home: str) -> str:
    lines = []
    places = sum(len(g) for g in d.looked.values())
    lines.append(f"Looked in {places} places of {len(d.looked)} formats under {home}.")
    if d.found:
        header = ("format", "sessions", "files", "size", "first", "last", "glob")
        rows = [
            (
                f.format,
                str(f.sessions),
                str(f.files),
                human_size(f.size),
                day(f.first),
                day(f.last),
                f.glob,
            )
            for f in d.found
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
        for r in [header, *rows]:
            cells = [
                c.rjust(w) if i in (1, 2, 3) else c.ljust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=False))
            ]
            lines.append("  ".join([*cells, r[-1]]))
        uncounted = sum(f.uncounted for f in d.found)
        if uncounted:
            lines.append(
                f"({uncounted} store(s) counted as one session each: only their reader"
                " could count them)"
            )
    else:
        lines.append("No agent logs found.")
    missing = [name for name in d.looked if name not in {f.format for f in d.found}]
    if missing:
        lines.append(f"Not found: {', '.join(missing)}.")
    if d.no_place:
        lines.append(
            f"No fixed place (name their files in a config by hand): {', '.join(d.no_place)}."
        )
    return "\n".join(lines) + "\n"


def project_names(found: list[Found]) -> list[str]:
    """A project per place: the format's name, numbered when it was found in several."""
    per_format: dict[str, int] = {}
    for f in found:
        per_format[f.format] = per_format.get(f.format, 0) + 1
    seen: dict[str, int] = {}
    names = []
    for f in found:
        seen[f.format] = seen.get(f.format, 0) + 1
        names.append(f.format if per_format[f.format] == 1 else f"{f.format}-{seen[f.format]}")
    return names


def config_of(found: list[Found], directory: Path) -> dict[str, Any]:
    projects = {}
    for name, f in zip(project_names(found), found, strict=True):
        projects[name] = {
            "transcripts": {"glob": f.glob, "format": f.format},
            "queries": str(directory / "queries.yaml"),
            "labels": {"source": "judge"},
            "calibration": str(directory / f"calibration-{name}.jsonl"),
        }
    return {"projects": projects}


def write(d: Discovery, target: Path, force: bool) -> list[Path]:
    """The config and, beside it, what it names that is absent; the files written."""
    if not d.found:
        raise GrumemError(f"--write {target}: no agent logs found, so no project to write")
    if target.exists() and not force:
        raise GrumemError(f"--write {target}: the file exists; --force replaces it")
    directory = target.resolve().parent
    config = config_of(d.found, directory)
    validate_config(copy.deepcopy(config), str(target))  # what snakemake will check
    written = []
    queries = directory / "queries.yaml"
    if not queries.exists():
        with atomic_writer(queries) as f:
            f.write(STARTER_QUERIES)
        written.append(queries)
    for project in config["projects"].values():
        calibration = Path(project["calibration"])
        if not calibration.exists():
            with atomic_writer(calibration) as f:
                f.write("")
            written.append(calibration)
    with atomic_writer(target) as f:
        f.write(
            "# Written by `grumem discover --write`: one project per place agent logs were\n"
            "# found. Run: snakemake --configfile <this file> --cores 2 all\n"
        )
        yaml.safe_dump(config, f, sort_keys=False, allow_unicode=True)
    written.append(directory / target.name)
    return written


def main(args: argparse.Namespace) -> int:
    if args.home is None:
        home, env = str(Path.home()), dict(os.environ)
    else:
        if not os.path.isdir(args.home):
            raise GrumemError(f"--home {args.home}: not a directory")
        # another root: the environment's overrides point outside it
        home, env = os.path.abspath(args.home), {}
    d = discover(home, env)
    sys.stdout.write(report(d, home))
    if args.write is not None:
        for path in write(d, Path(args.write), args.force):
            print(f"wrote {path}")
        print(
            f"Next: snakemake --configfile {args.write} -n all (what would run). The export"
            " needs each project's calibration file filled by a person: docs/judge.md."
        )
    return 0
