"""Typed, fully defaulted settings shared by the server and the CLI.

`Settings` is a dataclass with snake_case fields; on the wire (LSP
`initializationOptions`, `workspace/didChangeConfiguration`) the names are camelCase.
`parse_settings(raw, base)` never raises: every field is structured and validated on its
own, an invalid value keeps the base (default) value and adds a human-readable problem
naming the setting, so one bad field never costs the others.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

logger = logging.getLogger(__name__)

#: the offline model built on this machine at first use (`completion/lm/builtin.py`)
BUILTIN_MODEL = "builtin"
#: a random 2-layer transformer with a real tokenizer, for tests (`completion/lm/tiny.py`)
TINY_MODEL = "tiny"
#: model names that are neither hub ids nor paths
BUILTIN_MODELS = (BUILTIN_MODEL, TINY_MODEL)
DEFAULT_MODEL = BUILTIN_MODEL
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: key/value cache of the model: static buffers (CUDA graphs) on CUDA for auto
KV_CACHES = ("auto", "static", "dynamic")
#: where the model runs (`completion.lm.backends` maps each name to its loader): in
#: process through transformers or llama.cpp, or behind an inference server
BACKENDS = ("auto", "transformers", "llamacpp", "server")
#: the environment variable the server backend reads its API key from, unless set otherwise
DEFAULT_API_KEY_ENV = "ADAPTRACK_API_KEY"
#: section name under which editors send the settings in didChangeConfiguration
SETTINGS_SECTION = "adaptrack"


def cache_root() -> Path:
    """The user cache directory of adaptrack-lsp (built models, API index caches; never
    inside a workspace): ``$ADAPTRACK_CACHE``, else the platform's user cache folder
    (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux) + ``adaptrack-lsp``."""
    explicit = os.environ.get("ADAPTRACK_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "adaptrack-lsp"


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def is_hub_id(name: str) -> bool:
    """Whether a model setting has the shape of a Hugging Face hub id (``org/name`` or
    ``name``; not ``builtin`` or ``tiny``, the models built on this machine).

    A hub id is always a hub id: a folder of the same name in the working directory is
    never loaded in its place.  Local folders are written as paths: absolute, ``~/...``,
    or explicitly relative (``./models/m``)."""
    return bool(_HUB_ID.match(name)) and not name.startswith(".") and name not in BUILTIN_MODELS and not name.lower().endswith(".gguf")


def model_argument(value: str) -> str:
    """A ``--model`` command-line value: ``builtin``, ``tiny`` and hub ids as given, a path
    made absolute against the directory the command was typed in (the user's own shell),
    so that the server never resolves it against its working directory."""
    if value in BUILTIN_MODELS or is_hub_id(value):
        return value
    return os.path.abspath(os.path.expanduser(value))


def _nonempty(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _schema(**facts: Any) -> Callable[[Callable], Callable]:
    """Attach JSON-schema facts (enum, minimum, ...) to a check, for `settings_schema`."""

    def attach(check: Callable) -> Callable:
        check.schema = facts
        return check

    return attach


@_schema(enum=list(DEVICES))
def _device(value: str) -> str | None:
    if value in DEVICES or re.fullmatch(r"cuda:\d+", value):
        return None
    return f"must be one of {', '.join(DEVICES)} (or cuda:N)"


#: the values of the setting `diagnostics`
DIAGNOSTICS = ("off", "hint", "warning", "error")


@_schema(enum=list(DIAGNOSTICS))
def _diagnostics(value: str) -> str | None:
    return None if value in DIAGNOSTICS else f"must be one of {', '.join(DIAGNOSTICS)}"


@_schema(enum=list(DTYPES))
def _dtype(value: str) -> str | None:
    return None if value in DTYPES else f"must be one of {', '.join(DTYPES)}"


@_schema(enum=list(KV_CACHES))
def _kv_cache(value: str) -> str | None:
    return None if value in KV_CACHES else f"must be one of {', '.join(KV_CACHES)}"


#: every decoder name, in the order the README lists them (the registry in
#: `completion.decoders` holds their classes and checks it has exactly these; settings
#: validate against this tuple without importing any decoder)
DECODER_NAMES = ("unconstrained", "constrained", "adaptrack", "exact", "asap", "cars", "rs", "ars", "rsft", "beam", "map")


@_schema(enum=list(BACKENDS))
def _backend(value: str) -> str | None:
    return None if value in BACKENDS else f"must be one of {', '.join(BACKENDS)}"


def _endpoint(value: str) -> str | None:
    """"" (no server) or an http(s) URL without credentials."""
    from urllib.parse import urlsplit

    if not value.strip():
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL such as http://127.0.0.1:8080"
    if parts.username or parts.password:
        return "must not hold credentials (the API key comes from the environment variable apiKeyEnv names)"
    return None


def _environment_name(value: str) -> str | None:
    if value == "" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        return None
    return "must be the name of an environment variable (letters, digits, _), not the key itself"


_endpoint.hides_value = True
_environment_name.hides_value = True


@_schema(enum=list(DECODER_NAMES))
def _decoder(value: str) -> str | None:
    return None if value in DECODER_NAMES else f"must be one of {', '.join(DECODER_NAMES)}"


def _between(low: float, high: float) -> Callable[[float], str | None]:
    @_schema(minimum=low, maximum=high)
    def check(value: float) -> str | None:
        if not math.isfinite(value) or not low <= value <= high:
            return f"must be between {low:g} and {high:g}"
        return None

    return check


#: lowest temperature above 0: below it the scaled log-probabilities overflow (and the
#: distribution is the greedy one anyway)
MIN_TEMPERATURE = 1e-3


@_schema(minimum=0, maximum=10)
def _temperature(value: float) -> str | None:
    if value == 0.0 or (math.isfinite(value) and MIN_TEMPERATURE <= value <= 10.0):
        return None
    return f"must be 0 (greedy) or between {MIN_TEMPERATURE:g} and 10"


@_schema(exclusiveMinimum=0, maximum=1)
def _top_p(value: float) -> str | None:
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        return "must be in (0, 1]"
    return None


def _optional_at_least(low: int) -> Callable[[int | None], str | None]:
    @_schema(minimum=low)
    def check(value: int | None) -> str | None:
        return None if value is None or value >= low else f"must be null or at least {low}"

    return check


@_schema(items={"type": "string"})
def _version_targets(value: tuple[str, ...]) -> str | None:
    """Each item must be a requirement specifier with a name (``numpy>=1.24,<3``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    for item in value:
        try:
            requirement = Requirement(item)
        except InvalidRequirement as error:
            reason = str(error).splitlines()[0].strip()
            return f"has {item!r}, which is not a requirement specifier ({reason}); write e.g. 'numpy>=1.24,<3'"
        if requirement.url:
            return f"has {item!r}, a URL; a target is a package name and a version range"
    return None


def _optional_between(low: int, high: int) -> Callable[[int | None], str | None]:
    @_schema(minimum=low, maximum=high)
    def check(value: int | None) -> str | None:
        return None if value is None or low <= value <= high else f"must be null or between {low} and {high}"

    return check


#: the largest `contextTokens`
MAX_CONTEXT_TOKENS = 32768
#: `contextTokens` when the setting is null and the model names none (`lm.default_context_tokens`)
DEFAULT_CONTEXT_TOKENS = 1024


def _validated(default: Any, check: Callable[[Any], str | None] | None = None, **kwargs: Any) -> Any:
    return field(default=default, metadata={"check": check}, **kwargs)


@dataclass
class Settings:
    """Server and engine settings; every field has a default."""

    #: "builtin" = the offline model built on first use; a local directory or a Hugging
    #: Face hub id ("tiny": a random transformer for tests)
    model: str = _validated(DEFAULT_MODEL, _nonempty)
    device: str = _validated("auto", _device)
    dtype: str = _validated("auto", _dtype)
    #: auto = static buffers with CUDA graphs on CUDA, the dynamic cache elsewhere
    kv_cache: str = _validated("auto", _kv_cache)
    #: CPU threads for the model (llama.cpp; transformers on the CPU); None = automatic
    #: (one for small models, else half the cores)
    threads: int | None = _validated(None, _optional_at_least(1))
    #: llama.cpp: layers offloaded to the GPU; None = all when llama.cpp was built with a
    #: GPU backend (CUDA, Metal, Vulkan), else none; 0 = CPU only
    gpu_layers: int | None = _validated(None, _optional_at_least(0))
    #: ghost text (inline completion): any name of `DECODER_NAMES`
    decoder: str = _validated("adaptrack", _decoder)
    #: completion lists: `exact` samples P(s | c) exactly, per sample
    list_decoder: str = _validated("exact", _decoder)
    #: 0 = greedy ghost text; completion lists sample at max(temperature, 1.0)
    temperature: float = _validated(0.0, _temperature)
    num_samples: int = _validated(5, _between(1, 64))
    max_new_tokens: int = _validated(48, _between(1, 1024))
    #: tokens of project context before the current file: other open documents and the
    #: workspace modules the file imports (0 = none; None = automatic: 2048 for the
    #: built-in model, 1024 for the others; docs/context.md)
    context_tokens: int | None = _validated(None, _optional_between(0, MAX_CONTEXT_TOKENS))
    #: None = unbounded backtracking (exact AdapTrack)
    max_backtrack_distance: int | None = _validated(None, _optional_at_least(0))
    top_p_validity: float = _validated(1.0, _top_p)
    #: None = workspace .venv/venv (trusted workspaces only), else $VIRTUAL_ENV, else the
    #: server's interpreter
    python_path: str | None = _validated(None)
    #: path to a SnapshotIndex JSON file; None = ask the live environment
    api_snapshot: str | None = _validated(None)
    #: requirement specifiers ("numpy>=1.24,<3"): completions must also be valid in the
    #: lowest and highest release of each range (docs/versions.md)
    version_targets: tuple[str, ...] = _validated((), _version_targets)
    runtime_introspection: bool = _validated(True)
    #: keyword names in calls the API index resolves must be parameters of the installed
    #: signature (docs/keyword-arguments.md)
    keyword_arguments: bool = _validated(True)
    timeout_ms: int = _validated(3000, _between(1, 600_000))
    multiline: bool = _validated(False)
    #: version diagnostics on open documents (`adaptrack-lsp check` in the editor):
    #: "off", or the severity of a finding ("hint", "warning", "error"); deprecations
    #: are always hints
    diagnostics: str = _validated("warning", _diagnostics)
    #: completions treat APIs that announce their deprecation as absent
    avoid_deprecated: bool = _validated(False)
    #: completions keep the text before the cursor a prefix of a valid Python 3.11
    #: program (off for a request whose text before the cursor has a syntax error)
    syntax_constraint: bool = _validated(True)
    trust_remote_code: bool = _validated(False)
    #: where the model runs: "transformers" or "llamacpp" (in process; "auto" picks
    #: llamacpp for a .gguf model, else transformers) or "server" (an OpenAI-compatible
    #: inference server at `endpoint`)
    backend: str = _validated("auto", _backend)
    #: the inference server's URL for backend "server", e.g. http://127.0.0.1:8080
    endpoint: str = _validated("", _endpoint)
    #: the served model's tokenizer files (folder or hub id) for backend "server"; "" = `model`
    tokenizer: str = _validated("")
    #: the model name sent to the server; "" = the one model it serves
    server_model: str = _validated("")
    #: the environment variable holding the server's API key (the key is never a setting)
    api_key_env: str = _validated(DEFAULT_API_KEY_ENV, _environment_name)
    #: top log-probabilities the server returns per position (the rest is one tail bucket)
    server_top_logprobs: int = _validated(20, _between(1, 100))
    #: tokens one server request computes ahead along the model's own path
    server_lookahead: int = _validated(32, _between(1, 256))
    #: the longest one server request may take (the decode's `timeoutMs` also bounds it)
    server_timeout_ms: int = _validated(10_000, _between(100, 600_000))
    #: the user trusts the opened folder: its .venv/venv may be used and modules imported
    #: for runtime introspection (VS Code sends `workspace.isTrusted`)
    trusted_workspace: bool = _validated(False)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    #: fields whose change needs the model to be loaded again
    MODEL_FIELDS = ("model", "device", "dtype", "kv_cache", "threads", "gpu_layers", "trust_remote_code")
    #: the engine's fields (backend, inference server) need a load too
    MODEL_FIELDS += (
        "backend",
        "endpoint",
        "tokenizer",
        "server_model",
        "api_key_env",
        "server_top_logprobs",
        "server_lookahead",
        "server_timeout_ms",
    )
    #: fields the editor client fills in itself (VS Code: from workspace trust), never
    #: offered as an editor setting
    CLIENT_PROVIDED_FIELDS = ("trusted_workspace",)

    def model_key(self) -> tuple:
        return tuple(getattr(self, name) for name in self.MODEL_FIELDS)


def to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
CAMEL_TO_FIELD = {to_camel(name): name for name in FIELDS}


# -- strict scalar hooks: "3" is not an int, 3.5 is not an int, 1 is not a bool ----------
def _strict_int(value: Any, _type: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"expected an integer, got {value!r}")


def _strict_float(value: Any, _type: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _strict_bool(value: Any, _type: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _strict_str(value: Any, _type: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _strict_strings(value: Any, _type: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a list of strings, got {value!r}")
    return tuple(_strict_str(item, str) for item in value)


def make_converter() -> cattrs.Converter:
    """A cattrs converter: strict scalars, camelCase names for `Settings`."""
    converter = cattrs.Converter()
    converter.register_structure_hook_func(lambda kind: kind == tuple[str, ...], _strict_strings)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook(str, _strict_str)
    renames = {name: override(rename=to_camel(name)) for name in FIELDS}
    renames["version_targets"] = override(rename="versionTargets", unstruct_hook=list)  # a JSON list
    converter.register_unstructure_hook(Settings, make_dict_unstructure_fn(Settings, converter, **renames))
    return converter


converter = make_converter()


def settings_to_wire(settings: Settings) -> dict[str, Any]:
    """camelCase dict, as editors send it."""
    return converter.unstructure(settings)


def _field_type(name: str) -> Any:
    import typing

    return typing.get_type_hints(Settings)[name]


def unwrap_section(raw: Any) -> Any:
    """didChangeConfiguration sends `{"adaptrack": {...}}`; accept the bare object too."""
    if isinstance(raw, Mapping) and SETTINGS_SECTION in raw and isinstance(raw[SETTINGS_SECTION], Mapping):
        return raw[SETTINGS_SECTION]
    return raw


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a camelCase (or snake_case) mapping laid over `base` (defaults).

    Never raises.  Returns the settings and a list of problems, one per rejected value,
    each naming the setting (camelCase) and what was wrong; rejected fields keep their
    base value.  An explicit null restores a field's default.  Unknown keys are ignored
    (editors may send their own keys) and logged.
    """
    base = base if base is not None else Settings()
    problems: list[str] = []
    raw = unwrap_section(raw)
    if raw is None:
        return base, problems
    if not isinstance(raw, Mapping):
        return base, [f"settings must be an object, got {type(raw).__name__}; using defaults"]
    defaults = Settings()
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            continue
        name = CAMEL_TO_FIELD.get(key) or (key if key in FIELDS else None)
        if name is None:
            logger.info("ignoring unknown setting %r", key)
            continue
        wire_name = to_camel(name)
        if value is None:
            changes[name] = getattr(defaults, name)
            continue
        try:
            structured = converter.structure(value, _field_type(name))
        except Exception as error:  # cattrs raises many kinds; each is a bad value
            problems.append(f"setting {wire_name!r}: {_describe(error)}; using {getattr(base, name)!r}")
            continue
        check = FIELDS[name].metadata.get("check")
        reason = check(structured) if check else None
        if reason:
            # a value that may hold a secret (credentials in a URL, a key typed where its
            # variable's name belongs) is never echoed into messages or logs
            shown = "the value given" if getattr(check, "hides_value", False) else repr(value)
            problems.append(f"setting {wire_name!r}: {shown} {reason}; using {getattr(base, name)!r}")
            continue
        changes[name] = structured
    return dataclasses.replace(base, **changes), problems


def _describe(error: Exception) -> str:
    if isinstance(error, cattrs.BaseValidationError):
        inner = error.exceptions[0] if error.exceptions else error
        return str(inner)
    return str(error)


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def settings_schema() -> dict[str, Any]:
    """The server settings as one machine-readable description (a JSON Schema object
    keyed by wire name), from which the editor clients' settings and the README table are
    checked (`adaptrack-lsp settings-schema` prints it)."""
    import typing

    hints = typing.get_type_hints(Settings)
    properties: dict[str, Any] = {}
    for name, spec in FIELDS.items():
        hint = hints[name]
        default = spec.default
        if typing.get_origin(hint) is tuple:  # a list of strings (versionTargets)
            kind, nullable, default = "array", False, list(default)
        else:
            arguments = [a for a in typing.get_args(hint) if a is not type(None)]
            base = arguments[0] if arguments else hint
            kind = _JSON_TYPES[base]
            nullable = type(None) in typing.get_args(hint)
        entry: dict[str, Any] = {"type": [kind, "null"] if nullable else kind, "default": default}
        check = spec.metadata.get("check")
        entry.update(getattr(check, "schema", {}))
        entry["restartsModel"] = name in Settings.MODEL_FIELDS
        entry["clientProvided"] = name in Settings.CLIENT_PROVIDED_FIELDS
        properties[to_camel(name)] = entry
    return {"type": "object", "title": "adaptrack-lsp server settings", "properties": properties}
