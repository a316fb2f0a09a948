"""TFv1 (paper §6.1): TensorFlow-v1-only APIs, asked for in a context that hides the version.

From the dotted names of a TensorFlow API (the committed snapshot by default) select every
``tf.compat.v1`` API whose name parts all start with a lower-case letter, whose last name
part no TF 2 API has, and that is not a prefix of another API (modules are not items).
Each becomes a prompt shaped like paper Figure 3; the oracle is ``.x.y`` in the v1 setting
(constraint: the compat.v1 names with the prefix removed) and ``.compat.v1.x.y`` in the
v2 setting (constraint: every TF 2 name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from adaptrack_lsp.evaluation.items import EvalItem

SETTINGS = ("v1", "v2")
V1_PREFIX = ("compat", "v1")
ROOT_ALIASES = ("tf", "tensorflow")

PROMPT_TEMPLATE = '''import tensorflow as tf

def {name}(*args, **kwargs):
    """
    wrapper for {path}
    """
    return tf'''


def relative_parts(name: str) -> tuple[str, ...]:
    """``tensorflow.compat.v1.losses.log_loss`` (or ``tf.…``) -> ``("compat", "v1", "losses", "log_loss")``."""
    parts = tuple(name.strip().split("."))
    if parts and parts[0] in ROOT_ALIASES:
        parts = parts[1:]
    if not parts or any(not p for p in parts):
        raise ValueError(f"malformed API name {name!r}")
    return parts


def _starts_lower(part: str) -> bool:
    return bool(part) and part[0].islower()


def select_tfv1_apis(names: Iterable[str], kinds: Mapping[str, str] | None = None) -> list[str]:
    """The TFv1 API paths (relative to ``tf.compat.v1``, e.g. ``losses.log_loss``), sorted.

    `names` are the full dotted names of one TensorFlow API (with or without the
    ``tensorflow.``/``tf.`` root).  Rules (paper §6.1):

    1. under ``tf.compat.v1`` (names under ``tf.compat.v1.compat`` mirror other
       namespaces and are skipped);
    2. every name part after ``compat.v1`` starts with a lower-case letter;
    3. no TF 2 API (a name outside ``tf.compat``) has the same last name part;
    4. not a prefix of another API (``losses`` is a module, not an item); with `kinds`
       (the snapshot's name -> kind), a name whose kind is ``module`` is never an item
       either (a walk lists modules from other packages, ``tf.compat.v1.app.flags`` is
       absl's, without descending into them, so they look like leaves).
    """
    modules = {relative_parts(n) for n, kind in (kinds or {}).items() if kind == "module"}
    all_parts = {relative_parts(n) for n in names}
    v2_last_parts = {p[-1] for p in all_parts if p[0] != "compat"}
    v1 = {p[2:] for p in all_parts if p[:2] == V1_PREFIX and len(p) > 2}
    prefixes = {p[:i] for p in v1 for i in range(1, len(p))}
    selected = [
        p
        for p in v1
        if p[0] != "compat"
        and all(_starts_lower(part) for part in p)
        and p[-1] not in v2_last_parts
        and p not in prefixes
        and V1_PREFIX + p not in modules
    ]
    return sorted(".".join(p) for p in selected)


def v1_setting_names(names: Iterable[str]) -> list[str]:
    """The v1-setting API: ``tensorflow.compat.v1.x.y`` becomes ``tensorflow.x.y`` (paper §6.1)."""
    result = set()
    for n in names:
        p = relative_parts(n)
        if p[:2] == V1_PREFIX and len(p) > 2 and p[2] != "compat":
            result.add("tensorflow." + ".".join(p[2:]))
    return sorted(result)


def tfv1_prompt(path: str) -> str:
    """The Figure 3 prompt for API path ``x.y`` (ends right after ``return tf``)."""
    return PROMPT_TEMPLATE.format(name=path.rsplit(".", 1)[-1], path=path)


def tfv1_oracle(path: str, setting: str) -> str:
    if setting == "v1":
        return "." + path
    if setting == "v2":
        return ".compat.v1." + path
    raise ValueError(f"unknown TFv1 setting {setting!r}; choose one of: {', '.join(SETTINGS)}")


def build_tfv1(names: Iterable[str], setting: str, kinds: Mapping[str, str] | None = None) -> list[EvalItem]:
    """TFv1 items for `setting` ("v1" or "v2") from the full API names (and their kinds)."""
    paths = select_tfv1_apis(names, kinds)
    return [
        EvalItem(
            item_id=path,
            prompt=tfv1_prompt(path),
            oracle=tfv1_oracle(path, setting),
            meta={"api": "tf.compat.v1." + path, "setting": setting},
        )
        for path in paths
    ]


def items_from_paths(paths: Sequence[str], setting: str) -> list[EvalItem]:
    """Items for given API paths (tests, custom subsets)."""
    return [
        EvalItem(path, tfv1_prompt(path), tfv1_oracle(path, setting), {"api": "tf.compat.v1." + path, "setting": setting})
        for path in paths
    ]
