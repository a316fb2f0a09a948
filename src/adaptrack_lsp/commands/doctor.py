"""`adaptrack-lsp doctor`: what the server would use, and what is wrong with it.

One line per check: the server's interpreter and the core's packages with versions, the
extras installed, the project interpreter whose packages validate completions and how it
was found, workspace trust, each version target's environment (``--target``, ``--target-from``:
the time its dependencies are as of and what was installed) or why it could not be built, the model and its backend (for an inference server: reachable,
tokenizer matching), the cache folders and their sizes.  Each problem line names its fix;
the exit code is 1 when something would fail (a `FAIL` line), else 0.  `--json` prints the
same checks as one JSON object (the Neovim plugin's `:checkhealth adaptrack` reads it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

from adaptrack_lsp.config import model_argument

HELP = "check the installation and settings: what the server would use and what is wrong (with the fix)"

OK, INFO, WARN, FAIL = "ok", "info", "warn", "FAIL"
#: the core's distributions (module, distribution): what `pip install adaptrack-lsp` brings
CORE = (
    ("numpy", "numpy"),
    ("tokenizers", "tokenizers"),
    ("jedi", "jedi"),
    ("lark", "lark"),
    ("tree_sitter", "tree-sitter"),
    ("tree_sitter_python", "tree-sitter-python"),
    ("pygls", "pygls"),
    ("lsprotocol", "lsprotocol"),
    ("httpx", "httpx"),
)


@dataclass
class Check:
    name: str
    level: str
    detail: str
    fix: str = ""


def add_arguments(parser) -> None:
    from adaptrack_lsp.commands.serve import add_backend_arguments

    parser.add_argument("--model", default=None, type=model_argument, help="the model to check (default: the settings' default, builtin)")
    add_backend_arguments(parser)
    parser.add_argument("--python", default=None, help="the project interpreter (the pythonPath setting)")
    parser.add_argument("--snapshot", default=None, help="an API snapshot JSON (the apiSnapshot setting)")
    parser.add_argument("--workspace", default=None, help="the project folder (its .venv counts when trusted)")
    parser.add_argument("--trust-workspace", action="store_true", help="as a trusted workspace")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    from adaptrack_lsp.commands.target_options import add_target_arguments

    add_target_arguments(parser)


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _size(path) -> int:
    """Bytes of the files under `path` (a folder another process deletes meanwhile counts what was seen)."""
    import os

    total = 0
    for root, _dirs, files in os.walk(path):  # errors (a vanished folder) are skipped
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += stat.st_size if not os.path.islink(os.path.join(root, name)) else 0
    return total


def check_installation() -> list[Check]:
    from adaptrack_lsp import __version__
    from adaptrack_lsp.extras import EXTRAS, install_command, installed, present

    python = f"{sys.executable} (Python {sys.version.split()[0]})"
    checks = [Check("server", OK, f"adaptrack-lsp {__version__} on {python}")]
    reinstall = f"{sys.executable} -m pip install --force-reinstall adaptrack-lsp"
    versions, broken = [], []
    for module, distribution in CORE:
        found = _version(distribution)
        if found is None or not present(module):
            broken.append(distribution)
        else:
            versions.append(f"{distribution} {found}")
    if broken:
        checks.append(Check("packages", FAIL, f"missing: {', '.join(broken)}", reinstall))
    else:
        checks.append(Check("packages", OK, ", ".join(versions)))
    for name, missing in installed().items():
        extra = EXTRAS[name]
        if not missing:
            have = ", ".join(f"{d} {_version(d) or '?'}" for d in extra.packages)
            checks.append(Check(f"extra {name}", OK, f"{have}: {extra.purpose}"))
        else:
            checks.append(Check(f"extra {name}", INFO, f"not installed ({extra.purpose})", install_command(name)))
    return checks


def check_project(settings, workspace: str | None) -> list[Check]:
    from pathlib import Path

    from adaptrack_lsp.apis.index_cache import EnvironmentProbeError, probe_environment
    from adaptrack_lsp.apis.jedi_index import find_python, workspace_environment

    checks = []
    if settings.trusted_workspace:
        checks.append(Check("trust", OK, "workspace trusted: its .venv may be used and its modules imported for introspection"))
    else:
        unused = workspace_environment(workspace) if workspace else None
        detail = "workspace not trusted: no interpreter or module of it runs"
        if unused:
            checks.append(Check("trust", WARN, f"{detail}; its {unused[0]} is not used", "trust the workspace (VS Code: Workspace Trust; CLI: --trust-workspace) or set pythonPath"))
        else:
            checks.append(Check("trust", OK, detail))
    if settings.api_snapshot:
        path = Path(settings.api_snapshot).expanduser()
        if path.is_file():
            checks.append(Check("api", OK, f"API snapshot {path}"))
        else:
            checks.append(Check("api", FAIL, f"API snapshot {path} does not exist", "write it with `adaptrack-lsp index` or clear apiSnapshot"))
        return checks
    python, how, problem = find_python(settings.python_path, workspace, settings.trusted_workspace)
    if python is None:
        checks.append(Check("project python", FAIL, problem, "set pythonPath to the project's interpreter or environment folder"))
        return checks
    try:
        facts = probe_environment(python)
    except EnvironmentProbeError as error:
        checks.append(Check("project python", FAIL, str(error), "set pythonPath to a working interpreter (or repair that environment)"))
        return checks
    checks.append(Check("project python", OK, f"{python} (Python {facts.version}, {how}): its installed versions validate completions"))
    return checks


def check_model(settings) -> list[Check]:
    from adaptrack_lsp.completion.lm.loading import backend_for
    from adaptrack_lsp.config import BUILTIN_MODEL, TINY_MODEL
    from adaptrack_lsp.extras import MissingExtra, require

    backend = backend_for(settings)
    name = f"model {settings.model!r} on {backend}"
    try:
        if backend == "transformers" and settings.model != BUILTIN_MODEL:
            require("transformers", f"model {settings.model!r}")
        elif backend == "llamacpp":
            require("llamacpp", "the llamacpp backend", only=("llama-cpp-python",))
    except MissingExtra as error:
        message, _, command = str(error).rpartition(": ")
        return [Check("model", FAIL, message, command)]
    if backend == "server":
        return [_check_server(settings, name)]
    if settings.model == BUILTIN_MODEL:
        return [_check_builtin()]
    if settings.model == TINY_MODEL:
        return [Check("model", OK, f"{name}: a random test transformer, built at first use")]
    if backend == "llamacpp":
        from pathlib import Path

        path = Path(settings.model).expanduser()
        if not path.is_file():
            return [Check("model", FAIL, f"{name}: {path} does not exist", "set model to a .gguf file")]
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                return [Check("model", FAIL, f"{name}: {path} is not a GGUF file", "download or export it again (`adaptrack-lsp export-gguf`)")]
        return [Check("model", OK, f"{name}: {path.stat().st_size / 1e6:.0f} MB")]
    return [_check_transformers(settings, name)]


def _check_builtin() -> Check:
    from adaptrack_lsp.completion.lm.builtin import MARKER, DamagedModel, builtin_model_path, load_folder

    folder = builtin_model_path()
    if not (folder / MARKER).is_file():
        return Check("model", OK, f"builtin: not built yet; built at first use (one to two minutes) into {folder}")
    try:
        load_folder(folder)
    except DamagedModel as error:
        return Check("model", WARN, f"builtin: the cached model in {folder} is damaged ({error}); it is rebuilt at the next start", f"or delete {folder}")
    return Check("model", OK, f"builtin: built, {_size(folder) / 1e6:.0f} MB in {folder}")


def _check_transformers(settings, name: str) -> Check:
    from adaptrack_lsp.completion.lm.hf import resolve_model_source

    try:
        source, local = resolve_model_source(settings.model)
    except Exception as error:
        return Check("model", FAIL, f"{name}: {error}", "set model to builtin, a model folder or a hub id")
    if local:
        return Check("model", OK, f"{name}: the folder {source}")
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(source, local_files_only=True, allow_patterns=["config.json"])
    except Exception:
        return Check("model", WARN, f"{name}: not in the Hugging Face cache; downloaded at the first start", "or download it now: hf download " + source)
    return Check("model", OK, f"{name}: in the Hugging Face cache ({folder})")


def _check_server(settings, name: str) -> Check:
    from adaptrack_lsp.completion.lm.base import ModelError
    from adaptrack_lsp.completion.lm.loading import load_for_settings

    if not settings.endpoint:
        return Check("model", FAIL, f"{name}: no endpoint", "set endpoint to the inference server's URL (e.g. http://127.0.0.1:8080)")
    try:
        lm = load_for_settings(settings)
    except ModelError as error:
        return Check("model", FAIL, f"{name}: {error}", "see docs/engines.md#serving-a-team")
    try:
        problem = getattr(lm, "connect_error", "")
        if problem:
            return Check("model", FAIL, f"{name}: {problem}", "start the server, or fix endpoint / tokenizer")
        return Check("model", OK, f"{name}: reachable at {lm.url}, tokenizer matches")
    finally:
        close = getattr(lm, "close", None)
        if close is not None:
            close()


def check_cache() -> list[Check]:
    import os

    from adaptrack_lsp.config import cache_root

    root = cache_root()
    if not root.exists():
        return [Check("cache", OK, f"{root} (empty; made at first use)")]
    if not os.access(root, os.W_OK):
        return [Check("cache", WARN, f"{root} is not writable: built models are kept in memory only, rebuilt at every start", "set ADAPTRACK_CACHE to a writable folder")]
    sizes = sorted(((_size(item), item.name) for item in root.iterdir() if item.is_dir() and not item.name.startswith(".")), reverse=True)
    listed = ", ".join(f"{name} {size / 1e6:.0f} MB" for size, name in sizes[:6])
    more = f", {len(sizes) - 6} more" if len(sizes) > 6 else ""
    total = sum(size for size, _ in sizes)
    return [Check("cache", OK, f"{root}: {total / 1e6:.0f} MB ({listed}{more}); deleting it is always safe")]


def check_targets(settings, strict: bool = False) -> list[Check]:
    """One line per version target version: the environment its snapshot was built in
    (the time its dependencies are as of, what was installed) or why it could not be
    built, with the fix.  Builds what is not cached yet (progress on stderr)."""
    if not settings.version_targets:
        return []
    from adaptrack_lsp.apis.snapshot import SnapshotIndex
    from adaptrack_lsp.apis.targets import TargetsIndex
    from adaptrack_lsp.commands.explain import describe_environments
    from adaptrack_lsp.commands.target_options import target_printer

    nothing = SnapshotIndex(data={"package": "nothing", "root": "nothing", "names": []})
    index = TargetsIndex(nothing, settings.version_targets, progress=target_printer("doctor"), strict=strict)
    index.prepare()
    checks = []
    import re

    for line in describe_environments(index):
        failure = next((f for f in index.failures if line.startswith(f)), None)
        if failure is not None:
            fix = re.search(r"\(([^()]*)\)$", failure)
            checks.append(Check("version target", FAIL if strict else WARN, line, fix.group(1) if fix else "see the reason"))
        else:
            checks.append(Check("version target", INFO if "do not import" in line or "do not install" in line else OK, line))
    return checks


def settings_from(args):
    from adaptrack_lsp.commands.serve import backend_settings
    from adaptrack_lsp.commands.target_options import target_settings
    from adaptrack_lsp.config import parse_settings

    raw = {"model": args.model, "pythonPath": args.python, "apiSnapshot": args.snapshot, **backend_settings(args)}
    if args.trust_workspace:
        raw["trustedWorkspace"] = True
    raw.update(target_settings(args, "doctor"))
    return parse_settings({k: v for k, v in raw.items() if v is not None})


def run(args) -> int:
    try:
        settings, errors = settings_from(args)
    except ValueError as error:  # --target-from: a file that cannot be read
        print(f"adaptrack-lsp doctor: {error}", file=sys.stderr)
        return 2
    checks = check_installation()
    checks += [Check("settings", FAIL, error, "fix the setting") for error in errors]
    from adaptrack_lsp.commands.target_options import strict_targets

    parts = (lambda: check_project(settings, args.workspace), lambda: check_targets(settings, strict_targets(args)),
             lambda: check_model(settings), check_cache)
    for part in parts:
        try:
            checks += part()
        except Exception as error:  # a check that cannot run is a finding, not a crash
            checks.append(Check("doctor", FAIL, f"{type(error).__name__}: {error}", "report this with the output of `adaptrack-lsp doctor -vv`"))
    failed = any(check.level == FAIL for check in checks)
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [asdict(check) for check in checks]}, indent=1))
    else:
        for check in checks:
            print(f"{check.level:<4}  {check.name}: {check.detail}")
            if check.fix and check.level != OK:
                print(f"      fix: {check.fix}")
        print("something would fail: see the FAIL lines" if failed else "no problem found")
    return 1 if failed else 0
