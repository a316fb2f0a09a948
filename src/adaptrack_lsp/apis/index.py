"""API indexes: which attribute paths exist in an environment, and what calls take.

`APIIndex.members(path)` answers for a module-qualified path such as
``("numpy", "linalg")``: a mapping of member name -> `Member`, or None when unknown
(timeout, unresolvable, error) — unknown means *unconstrained*, never "empty".

`APIIndex.signature(key)` answers for a *call key*: an expression path ending in
`CALL` (``("numpy", "histogram", "()")``, the call of ``numpy.histogram``); a `CALL`
inside the path is the value a call returns (``("pandas", "read_csv", "()", "to_csv",
"()")``: the method ``to_csv`` of what ``pandas.read_csv()`` returns).  The answer is a
`Signature`, or None when unknown (no signature, unresolvable, not computed in time):
unknown means any keyword is allowed.  Member paths and call keys share `ready`,
`prefetch` and `wait_ready`, so a signature still being computed is "pending" exactly
like members are.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

#: the path element meaning "the call of the expression before it" (see the module docstring)
CALL = "()"


@dataclass(frozen=True)
class Member:
    name: str
    #: "module", "class", "function", "instance", "statement", "keyword", ... (jedi's types)
    kind: str
    #: whether the member can have members of its own (modules, classes, instances)
    has_members: bool = True
    #: the message of a member that announces its deprecation in a way the runtime can
    #: read (`introspect_worker.deprecation_of`); "" when it does not (or nobody asked
    #: the runtime: jedi alone leaves it undecided)
    deprecated: str = ""

    def to_list(self) -> list:
        """As the worker, the disk cache and snapshots write it: ``[kind, has_members]``,
        plus the deprecation message for a deprecated member."""
        return [self.kind, self.has_members, self.deprecated] if self.deprecated else [self.kind, self.has_members]

    @classmethod
    def from_list(cls, name: str, items: Sequence) -> Member:
        """The inverse of `to_list` (a third item that is not a message is ignored)."""
        message = items[2] if len(items) > 2 and isinstance(items[2], str) else ""
        return cls(name, str(items[0]), bool(items[1]), message)


#: parameter kinds, as `inspect.Parameter` names them (lower case)
POSITIONAL_ONLY = "positional_only"
POSITIONAL_OR_KEYWORD = "positional_or_keyword"
VAR_POSITIONAL = "var_positional"
KEYWORD_ONLY = "keyword_only"
VAR_KEYWORD = "var_keyword"
_KINDS_BY_INSPECT = (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD, VAR_POSITIONAL, KEYWORD_ONLY, VAR_KEYWORD)


@dataclass(frozen=True)
class Signature:
    """The parameters of a callable: (name, kind) pairs in order, kinds as in `inspect`.

    Written (snapshots, caches, the introspection worker) as Python's own parameter
    list notation: ``["a", "/", "b", "*", "c", "**kwargs"]`` (`to_list`, `from_list`).
    """

    parameters: tuple[tuple[str, str], ...]
    #: names that can be passed as ``name=`` (positional-or-keyword and keyword-only)
    keywords: frozenset[str] = field(init=False, repr=False, compare=False)
    positional_only: frozenset[str] = field(init=False, repr=False, compare=False)
    #: the callable takes ``**kwargs``: any keyword is allowed
    any_keyword: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        kinds = dict(self.parameters)
        object.__setattr__(self, "keywords", frozenset(n for n, k in kinds.items() if k in (POSITIONAL_OR_KEYWORD, KEYWORD_ONLY)))
        object.__setattr__(self, "positional_only", frozenset(n for n, k in kinds.items() if k == POSITIONAL_ONLY))
        object.__setattr__(self, "any_keyword", any(k == VAR_KEYWORD for k in kinds.values()))

    def keyword_problem(self, name: str) -> str | None:
        """None when ``name=`` is allowed; else "positional-only" or "unknown".  With
        ``**kwargs`` every name is allowed (a positional-only name then lands in it)."""
        if self.any_keyword or name in self.keywords:
            return None
        return "positional-only" if name in self.positional_only else "unknown"

    def parameter_list(self) -> str:
        """The parameters as a person reads them: ``x, rate, noise_shape, seed, name``."""
        return ", ".join(self.to_list())

    def to_list(self) -> list[str]:
        """Python's parameter notation, one entry per item: names, ``/``, ``*``,
        ``*args``, ``**kwargs``."""
        out: list[str] = []
        seen_positional_only = False
        star_written = False
        for name, kind in self.parameters:
            if kind != POSITIONAL_ONLY and seen_positional_only:
                out.append("/")
                seen_positional_only = False
            if kind == POSITIONAL_ONLY:
                seen_positional_only = True
                out.append(name)
            elif kind == VAR_POSITIONAL:
                star_written = True
                out.append("*" + name)
            elif kind == KEYWORD_ONLY:
                if not star_written:
                    out.append("*")
                    star_written = True
                out.append(name)
            elif kind == VAR_KEYWORD:
                out.append("**" + name)
            else:
                out.append(name)
        if seen_positional_only:
            out.append("/")
        return out

    @classmethod
    def from_list(cls, items: Sequence[str]) -> Signature:
        """The inverse of `to_list`; ValueError for anything else."""
        if isinstance(items, str) or not isinstance(items, Sequence):
            raise ValueError("a signature is a list of parameter strings")
        parameters: list[tuple[str, str]] = []
        pending: list[str] = []  # names before a "/" (positional-only once it comes)
        keyword_only = False
        for item in items:
            if not isinstance(item, str):
                raise ValueError(f"signature item {item!r} is not a string")
            if item == "/":
                if keyword_only:
                    raise ValueError("'/' after '*' in a signature")
                parameters.extend((name, POSITIONAL_ONLY) for name in pending)
                pending = []
                continue
            if not item.startswith("*") and not keyword_only:
                pending.append(_identifier(item))
                continue
            parameters.extend((name, POSITIONAL_OR_KEYWORD) for name in pending)
            pending = []
            if item == "*":
                keyword_only = True
            elif item.startswith("**"):
                parameters.append((_identifier(item[2:]), VAR_KEYWORD))
            elif item.startswith("*"):
                parameters.append((_identifier(item[1:]), VAR_POSITIONAL))
                keyword_only = True
            else:
                parameters.append((_identifier(item), KEYWORD_ONLY))
        parameters.extend((name, POSITIONAL_OR_KEYWORD) for name in pending)
        return cls(tuple(parameters))

    @classmethod
    def from_parameters(cls, parameters: Iterable, bound: bool = False) -> Signature:
        """From parameter objects with ``.name`` and ``.kind`` (`inspect.Parameter`, or
        jedi's ``ParamName``); `bound` drops the first parameter (``self`` of a method
        taken from its class and called on an instance)."""
        pairs = []
        for parameter in parameters:
            kind = parameter.kind
            kind = kind.lower() if isinstance(kind, str) else _KINDS_BY_INSPECT[int(kind)]
            pairs.append((str(parameter.name), kind))
        if bound and pairs and pairs[0][1] in (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD):
            pairs = pairs[1:]
        return cls(tuple(pairs))

    @classmethod
    def merge(cls, signatures: Iterable[Signature]) -> Signature | None:
        """One signature accepting what any of `signatures` accepts (overloads); None
        for none.  A name keeps its most permissive kind."""
        rank = {POSITIONAL_ONLY: 0, VAR_POSITIONAL: 0, POSITIONAL_OR_KEYWORD: 1, KEYWORD_ONLY: 1, VAR_KEYWORD: 2}
        merged: dict[str, str] = {}
        count = 0
        for signature in signatures:
            count += 1
            for name, kind in signature.parameters:
                old = merged.get(name)
                if old is None or rank[kind] > rank[old]:
                    merged[name] = kind
        return cls(tuple(merged.items())) if count else None


def _identifier(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"signature parameter {name!r} is not an identifier")
    return name


#: first element of the key under which `APIIndex.submodules(path)` is computed
#: (``("<modules>", "numpy")``: the modules importable under numpy)
MODULES = "<modules>"
#: first element of the key under which the members of a path ending in `CALL` (what
#: an instance has) are computed: such a path alone would read as a call key
INSTANCE = "<members>"


def members_key(path: Sequence[str]) -> tuple[str, ...]:
    """The key `ready`/`prefetch`/`pending` use for `members(path)`: the path itself, or
    ``(INSTANCE, *path)`` for a path ending in `CALL` (an instance's members)."""
    path = tuple(path)
    return (INSTANCE, *path) if path and path[-1] == CALL else path


def modules_key(path: Sequence[str]) -> tuple[str, ...]:
    """The key of `submodules(path)` (``()``: the top-level modules)."""
    return (MODULES, *path)


def key_kind(key: Sequence[str]) -> str:
    """"modules", "members" or "signature" for a key of `ready`/`prefetch`."""
    if key and key[0] == MODULES:
        return "modules"
    if key and key[0] == INSTANCE:
        return "members"
    return "signature" if is_call_key(key) else "members"


def key_path(key: Sequence[str]) -> tuple[str, ...]:
    """The path a key asks about (the key without its marker)."""
    return tuple(key[1:]) if key and key[0] in (MODULES, INSTANCE) else tuple(key)


def describe_key(key: Sequence[str]) -> str:
    """A key as a person reads it: ``numpy.linalg``, ``numpy.histogram()``, ``the
    modules under numpy``, ``the top-level modules``."""
    if key and key[0] == MODULES:
        return f"the modules under {dotted(key[1:])}" if len(key) > 1 else "the top-level modules"
    return dotted(key_path(key))


def call_key(path: Sequence[str]) -> tuple[str, ...]:
    """The call key of the expression `path` (``("numpy", "histogram", "()")``)."""
    return (*path, CALL)


def is_call_key(key: Sequence[str]) -> bool:
    return bool(key) and key[-1] == CALL


def dotted(key: Sequence[str]) -> str:
    """A member path or call key as written: ``numpy.linalg``, ``pandas.read_csv().to_csv()``."""
    text = ""
    for part in key:
        text += part if part == CALL or not text else "." + part
    return text


class APIIndex(ABC):
    """Members of dotted paths in one environment or snapshot."""

    #: human-readable origin, e.g. "numpy 2.4.6" or "snapshot tensorflow 2.21.0"
    source: str = ""
    #: why this index cannot constrain ("" when it can); then every path is unknown
    problem: str = ""

    @abstractmethod
    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        """Members of `path` (a module-qualified dotted path), None when unknown."""

    def signature(self, key: tuple[str, ...]) -> Signature | None:
        """The signature of the call `key` (a call key, see the module docstring); None
        when unknown (then any keyword is allowed).  Default: unknown."""
        return None

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """The module names importable right under `path` (``()``: top-level modules;
        ``("numpy",)``: numpy's submodules, packages and modules registered at import
        time), or None when unknown (then an import of them is not checked).  Default:
        unknown."""
        return None

    def packages(self) -> dict[str, str]:
        """Top-level package -> version for the packages this index has answered about."""
        return {}

    def absence(self, path: tuple[str, ...], name: str, keyword: bool = False) -> str | None:
        """Where `name` is missing when it is missing only from some of the versions this
        index checks (version targets): ``not in numpy 2.4.6 (present in 1.24.0)``, for
        a member `name` of `path` or (`keyword`) a keyword `name` of the call key
        `path`.  None (the default): the index checks one version, or the name is in
        none of them; rejection messages then say what they said before."""
        return None

    def lacking(self, path: tuple[str, ...], name: str, keyword: bool = False) -> tuple[str, list[str], list[str]] | None:
        """What `absence` says, as data: (package, versions lacking `name`, versions
        having it) when some of the versions this index checks lack it and others have
        it; None (the default) otherwise."""
        return None

    def deprecated_in(self, path: tuple[str, ...], name: str) -> tuple[str, list[str]] | None:
        """(package, the versions in which member `name` of `path` is deprecated) where
        this index checks several versions (version targets) and knows; None (the
        default) otherwise: then the member's own `Member.deprecated` says it for the one
        version this index checks."""
        return None

    def ready(self, path: tuple[str, ...]) -> bool:
        """Whether `members(path)` (or `signature(path)` for a call key) answers now,
        without waiting (indexes that compute answers in the background say False while
        `path` is being computed)."""
        return True

    def prefetch(self, path: tuple[str, ...]) -> None:  # noqa: B027 - an optional hook
        """Start computing `path` (a member path or call key) in the background (no-op
        where answers are immediate)."""

    def wait_ready(self, paths, timeout_s: float) -> bool:
        """Wait until every path of `paths` is `ready` (at most `timeout_s`)."""
        return True

    def work_seconds(self) -> float:
        """Seconds this index has spent computing answers in the background (0 where
        answers are immediate)."""
        return 0.0

    def progress(self, root: str) -> tuple[int, int] | None:
        """(answered, asked): the background look-ups under top-level package `root`
        since it last had none waiting (what "indexing numpy (n/m)" shows); None where
        answers are immediate."""
        return None

    def has_root(self, module: str) -> bool:
        """Whether top-level `module` can be resolved (unresolvable roots are unconstrained)."""
        return self.members((module,)) is not None

    def close(self) -> None:  # noqa: B027 - an optional hook: most indexes hold nothing to stop
        """Stop background work and subprocesses (nothing by default)."""


def path_exists(index: APIIndex, path: tuple[str, ...] | list[str]) -> bool | None:
    """Whether the dotted chain `path` (``("numpy", "prod")``) is valid in `index`.

    True: every name after the root is a member of the path before it.  False: some
    name is known not to be one (or follows a member without members, a function).
    None: unknown somewhere along the chain (unconstrained).  This is how the chain
    monitor reads `members()`.
    """
    path = tuple(path)
    if not path:
        raise ValueError("empty path")
    if len(path) == 1:
        return True if index.members(path) is not None else None
    for depth in range(1, len(path)):
        members = index.members(path[:depth])
        if members is None:
            return None
        member = members.get(path[depth])
        if member is None:
            return False
        if depth + 1 < len(path) and not member.has_members:
            return False
    return True


def bundled_snapshot(package: str) -> str:
    """Path of the API snapshot shipped with adaptrack-lsp for `package`."""
    from importlib import resources

    data = resources.files("adaptrack_lsp") / "data"
    candidates = sorted(
        (entry for entry in data.iterdir() if entry.name.startswith(package + "-") and entry.name.endswith((".json", ".json.gz"))),
        key=lambda entry: entry.name,
    ) if data.is_dir() else []
    if not candidates:
        available = sorted(entry.name for entry in data.iterdir()) if data.is_dir() else []
        raise FileNotFoundError(f"no bundled API snapshot for {package!r} (available: {', '.join(available) or 'none'})")
    return str(candidates[-1])


# Implementations live in sibling modules and are re-exported here lazily (those modules
# import this one, and none of them imports anything heavy at module level).
_EXPORTS = {
    "JediIndex": "jedi_index",
    "default_cache_dir": "jedi_index",
    "module_snapshot": "snapshot",
    "find_python": "jedi_index",
    "RuntimeIntrospector": "introspection",
    "SnapshotError": "snapshot",
    "SnapshotIndex": "snapshot",
    "compat_v1_as_root": "snapshot",
    "read_snapshot": "snapshot",
    "tensorflow_v1_setting": "snapshot",
    "write_snapshot": "snapshot",
}

__all__ = [  # noqa: PLE0604 - the lazily exported names are strings too
    "APIIndex",
    "CALL",
    "INSTANCE",
    "MODULES",
    "describe_key",
    "key_kind",
    "key_path",
    "members_key",
    "modules_key",
    "Member",
    "Signature",
    "call_key",
    "dotted",
    "is_call_key",
    "bundled_snapshot",
    "path_exists",
    *_EXPORTS,
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"adaptrack_lsp.apis.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
