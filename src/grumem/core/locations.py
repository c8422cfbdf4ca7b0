"""Where agents keep their logs: a format's LOCATIONS expanded to globs.

A format module may list in `LOCATIONS` the places its tool writes sessions, as
globs with placeholders (`grumem discover` looks there, on Linux and macOS):

- a leading `~`: the home directory;
- `{XDG_DATA_HOME}`, `{XDG_CONFIG_HOME}`: those variables, else `~/.local/share`
  and `~/.config`;
- `{APP_SUPPORT}`: macOS's `~/Library/Application Support`;
- `{VSCODE_USER}`: each user directory of the VS Code family (Code, Code -
  Insiders, VSCodium, Cursor): `<XDG_CONFIG_HOME>/<name>/User` on Linux and
  `~/Library/Application Support/<name>/User` on macOS;
- `${VAR}`: the environment variable VAR, a tool's override of its directory
  (`${CODEX_HOME}/sessions/...`); the glob is left out when VAR is not set.

A variable holding a relative path counts as not set (the XDG specification says
to ignore one; a tool's override would name a place under whatever the working
directory is), so every glob is under the home or an absolute directory the
environment names, never under the working directory.

Pure: the home and the environment are arguments. What a placeholder puts in is
escaped, so a `[` or `*` in a home directory's name is matched as itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["VSCODE_FAMILY", "expand_location", "glob_escape"]

VSCODE_FAMILY = ("Code", "Code - Insiders", "VSCodium", "Cursor")
APP_SUPPORT = "Library/Application Support"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def glob_escape(text: str) -> str:
    """`text` as a glob matching only itself (what glob.escape does, without glob)."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _join(base: str, rest: str) -> str:
    return base.rstrip("/") + "/" + rest.lstrip("/") if rest else base


def expand_location(pattern: str, home: str, env: Mapping[str, str]) -> list[str]:
    """The globs a LOCATIONS entry stands for, in order, without repeats; none when a
    `${VAR}` it names is not set (or empty, or a relative path)."""
    home = glob_escape(home.rstrip("/") or "/")
    env = {k: v for k, v in env.items() if v.startswith("/")}  # unset: empty or relative
    missing = [name for name in _VAR.findall(pattern) if name not in env]
    if missing:
        return []
    text = _VAR.sub(lambda m: glob_escape(env[m.group(1)].rstrip("/")), pattern)
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    xdg_config = glob_escape(env["XDG_CONFIG_HOME"]) if "XDG_CONFIG_HOME" in env else None
    values = {
        "XDG_DATA_HOME": [
            glob_escape(env["XDG_DATA_HOME"])
            if "XDG_DATA_HOME" in env
            else _join(home, ".local/share")
        ],
        "XDG_CONFIG_HOME": [xdg_config or _join(home, ".config")],
        "APP_SUPPORT": [_join(home, APP_SUPPORT)],
        "VSCODE_USER": [
            _join(base, f"{glob_escape(name)}/User")
            for name in VSCODE_FAMILY
            for base in (xdg_config or _join(home, ".config"), _join(home, APP_SUPPORT))
        ],
    }
    globs = [text]
    for name, choices in values.items():
        token = "{" + name + "}"
        globs = [g.replace(token, c) for g in globs for c in (choices if token in g else [""])]
    return list(dict.fromkeys(globs))
