"""grumem.core.locations: a format's LOCATIONS as globs, from a home and an environment."""

from __future__ import annotations

from grumem.core.locations import expand_location, glob_escape

HOME = "/home/ana"


def test_a_leading_tilde_is_the_home() -> None:
    assert expand_location("~/.claude/projects/*/*.jsonl", HOME, {}) == [
        "/home/ana/.claude/projects/*/*.jsonl"
    ]
    assert expand_location("~", HOME + "/", {}) == ["/home/ana"]
    # not in the middle
    assert expand_location("/x/~/y", HOME, {}) == ["/x/~/y"]


def test_xdg_directories_take_their_variable_else_the_default() -> None:
    pattern = "{XDG_DATA_HOME}/goose/sessions/*.jsonl"
    assert expand_location(pattern, HOME, {}) == ["/home/ana/.local/share/goose/sessions/*.jsonl"]
    assert expand_location(pattern, HOME, {"XDG_DATA_HOME": "/data"}) == [
        "/data/goose/sessions/*.jsonl"
    ]
    assert expand_location("{XDG_CONFIG_HOME}/m/x.json", HOME, {"XDG_CONFIG_HOME": ""}) == [
        "/home/ana/.config/m/x.json"
    ]


def test_app_support_is_macos_library_directory() -> None:
    assert expand_location("{APP_SUPPORT}/zed/threads/threads.db", HOME, {}) == [
        "/home/ana/Library/Application Support/zed/threads/threads.db"
    ]


def test_vscode_user_is_every_editor_of_the_family_on_both_systems() -> None:
    globs = expand_location("{VSCODE_USER}/globalStorage/x/tasks/*/h.json", HOME, {})
    assert globs == [
        "/home/ana/.config/Code/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/Library/Application Support/Code/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/.config/Code - Insiders/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/Library/Application Support/Code - Insiders/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/.config/VSCodium/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/Library/Application Support/VSCodium/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/.config/Cursor/User/globalStorage/x/tasks/*/h.json",
        "/home/ana/Library/Application Support/Cursor/User/globalStorage/x/tasks/*/h.json",
    ]
    # XDG_CONFIG_HOME moves the Linux directories, not the macOS ones
    moved = expand_location("{VSCODE_USER}/a", HOME, {"XDG_CONFIG_HOME": "/cfg"})
    assert moved[:2] == ["/cfg/Code/User/a", "/home/ana/Library/Application Support/Code/User/a"]


def test_a_variable_override_is_used_when_set_and_its_glob_left_out_otherwise() -> None:
    pattern = "${CODEX_HOME}/sessions/*/*/*/rollout-*.jsonl"
    assert expand_location(pattern, HOME, {}) == []
    assert expand_location(pattern, HOME, {"CODEX_HOME": ""}) == []
    assert expand_location(pattern, HOME, {"CODEX_HOME": "/srv/codex/"}) == [
        "/srv/codex/sessions/*/*/*/rollout-*.jsonl"
    ]


def test_a_relative_path_in_a_variable_counts_as_unset() -> None:
    """Else a glob would look under the working directory, not a known place."""
    assert expand_location("${OPENCODE_DB}", HOME, {"OPENCODE_DB": "mine.db"}) == []
    assert expand_location("${OPENCODE_DB}", HOME, {"OPENCODE_DB": ":memory:"}) == []
    assert expand_location("${OPENCODE_DB}", HOME, {"OPENCODE_DB": "/d/o.db"}) == ["/d/o.db"]
    assert expand_location("{XDG_DATA_HOME}/zed/t.db", HOME, {"XDG_DATA_HOME": "data"}) == [
        "/home/ana/.local/share/zed/t.db"
    ]
    assert expand_location("{VSCODE_USER}/a", HOME, {"XDG_CONFIG_HOME": "cfg"})[0] == (
        "/home/ana/.config/Code/User/a"
    )


def test_what_a_placeholder_puts_in_matches_itself() -> None:
    assert glob_escape("/home/a[1]*?") == "/home/a[[]1][*][?]"
    assert expand_location("~/.x/*.json", "/home/we[ir]d", {}) == ["/home/we[[]ir]d/.x/*.json"]
    assert expand_location("${D}/*.json", HOME, {"D": "/x*y"}) == ["/x[*]y/*.json"]
