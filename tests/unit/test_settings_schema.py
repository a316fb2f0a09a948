"""Settings from one schema: `adaptrack_lsp.config.settings_schema()` against the four other
places that list the server settings (VS Code contributions, VS Code SERVER_DEFAULTS,
Neovim's config.lua, the table in docs/settings.md).  Adding, renaming or changing the default of a
setting in one place only fails here, naming the place."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from adaptrack_lsp.config import settings_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = settings_schema()["properties"]


def _types(entry) -> set[str]:
    kinds = entry["type"] if isinstance(entry["type"], list) else [entry["type"]]
    return {"number" if k == "integer" else k for k in kinds}


def test_the_command_prints_the_schema():
    done = subprocess.run([sys.executable, "-m", "adaptrack_lsp", "settings-schema"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["properties"] == json.loads(json.dumps(SCHEMA))


def test_schema_knows_every_setting_with_type_default_and_choices():
    assert SCHEMA["decoder"]["enum"] == SCHEMA["listDecoder"]["enum"]
    assert "exact" in SCHEMA["decoder"]["enum"]
    assert SCHEMA["numSamples"]["minimum"] == 1 and SCHEMA["topPValidity"]["exclusiveMinimum"] == 0
    assert SCHEMA["pythonPath"]["type"] == ["string", "null"] and SCHEMA["pythonPath"]["default"] is None
    assert SCHEMA["model"]["restartsModel"] and not SCHEMA["temperature"]["restartsModel"]


def test_vscode_contributions_follow_the_schema():
    properties = json.loads((ROOT / "vscode-client" / "package.json").read_text())["contributes"]["configuration"]["properties"]
    contributed = {key.removeprefix("adaptrack."): value for key, value in properties.items()}
    offered = {name: entry for name, entry in SCHEMA.items() if not entry["clientProvided"]}
    missing = sorted(set(offered) - set(contributed))
    assert not missing, f"vscode-client/package.json lacks adaptrack.{missing}"
    provided = sorted(set(SCHEMA) - set(offered))
    assert not set(provided) & set(contributed), f"package.json offers client-provided settings {provided}"
    for name, entry in offered.items():
        mine = contributed[name]
        assert mine["default"] == entry["default"], f"package.json adaptrack.{name}: default {mine['default']!r} != {entry['default']!r}"
        mine_types = {"number" if t == "integer" else t for t in (mine["type"] if isinstance(mine["type"], list) else [mine["type"]])}
        assert mine_types == _types(entry), f"package.json adaptrack.{name}: type {mine['type']}"
        if "enum" in entry:
            assert mine.get("enum") == entry["enum"], f"package.json adaptrack.{name}: enum"
        for bound in ("minimum", "maximum"):
            if bound in mine and bound in entry:
                assert mine[bound] == entry[bound], f"package.json adaptrack.{name}: {bound}"


def _typescript_defaults() -> dict:
    text = (ROOT / "vscode-client" / "src" / "settings.ts").read_text()
    body = re.search(r"SERVER_DEFAULTS: Readonly<ServerSettings> = Object\.freeze\(\{(.*?)\}\);", text, re.S).group(1)
    values = {}
    for name, value in re.findall(r"^\s*(\w+): (.+?),\s*$", body, re.M):
        values[name] = json.loads(value.replace("'", '"'))
    interface = re.search(r"export interface ServerSettings \{(.*?)\}", text, re.S).group(1)
    return values, re.findall(r"^\s*(\w+):", interface, re.M)


def test_vscode_server_defaults_follow_the_schema():
    defaults, interface = _typescript_defaults()
    assert list(defaults) == list(SCHEMA), "settings.ts SERVER_DEFAULTS: names or order differ from the schema"
    assert interface == list(SCHEMA), "settings.ts ServerSettings: names or order differ from the schema"
    for name, entry in SCHEMA.items():
        assert defaults[name] == entry["default"], f"settings.ts SERVER_DEFAULTS.{name}"


def test_neovim_client_follows_the_schema():
    text = (ROOT / "nvim-client" / "lua" / "adaptrack" / "config.lua").read_text()
    body = re.search(r"M\.server_settings = \{(.*?)\n\}", text, re.S).group(1)
    declared = dict(re.findall(r"^\s*(\w+) = '(\w+)',", body, re.M))
    assert list(declared) == list(SCHEMA), "config.lua server_settings: names or order differ from the schema"
    lua_types = {"table": "array"}  # a Lua list is a table
    for name, entry in SCHEMA.items():
        assert {lua_types.get(declared[name], declared[name])} <= _types(entry), f"config.lua server_settings.{name} = {declared[name]!r}"


def test_docs_settings_table_follows_the_schema():
    text = (ROOT / "docs" / "settings.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `(.+?)` \|", text, re.M)
    assert [name for name, _ in rows] == list(SCHEMA), "docs/settings.md table: names or order differ from the schema"
    for name, default in rows:
        assert json.loads(default) == SCHEMA[name]["default"], f"docs/settings.md table: {name} default {default}"
