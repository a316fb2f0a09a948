"""Deprecated members, as completions and the checker see them.

Which members are deprecated is the runtime's answer (`introspect_worker.deprecation_of`:
a deprecation warning on access, PEP 702's ``__deprecated__``, a ``.. deprecated::``
directive about the object in its docstring), carried by every index as
`Member.deprecated`.  This module owns what is done with it:

- `WithoutDeprecated`: an index view in which deprecated members do not exist (setting
  ``avoidDeprecated``): the API constraint never writes them, and a rejection says why
  (`absence`); `decoding_index` applies it where a request's settings ask for it;
- `deprecation_note`, `first_sentences`: a library's message cut to what one diagnostic
  line shows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from adaptrack_lsp.apis.index import APIIndex, Member, Signature, members_key

__all__ = ["WithoutDeprecated", "decoding_index", "deprecation_note", "first_sentences"]

#: the end of a sentence: ``.``/``!``/``?`` followed by space and what starts a sentence
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(*])")
#: how long the sentences of a message shown in one line may be together (the first
#: one is shown whole up to `SENTENCE_LIMIT`)
BRIEF_LIMIT = 120
SENTENCE_LIMIT = 200
#: the message of a directive without a body (`introspect_worker.docstring_deprecation`)
_SINCE_ONLY = re.compile(r"^deprecated since (\S+)$")


def first_sentences(message: str, limit: int = BRIEF_LIMIT) -> str:
    """The leading sentences of `message` that fit in `limit` characters together, on
    one line (the first one always, cut with an ellipsis past `SENTENCE_LIMIT`): ``This
    is deprecated. Use `warnings.catch_warnings` or `pytest.warns` instead.`` stays
    whole, NumPy's eight-sentence ``numpy.core`` message keeps its first sentence."""
    sentences = _SENTENCE_END.split(" ".join(str(message).split()))
    text = sentences[0]
    if len(text) > SENTENCE_LIMIT:
        return text[: SENTENCE_LIMIT - 1].rstrip() + "…"
    for sentence in sentences[1:]:
        if len(text) + 1 + len(sentence) > limit:
            break
        text += " " + sentence
    return text


def deprecation_note(written: str, where: str, message: str) -> str:
    """One line for a deprecated use: ``np.chararray is deprecated in numpy 2.4.6:
    <the library's message>``; a directive without a body says ``... is deprecated in
    numpy 2.4.6 (since 1.11.0)``.  `where`: `` in numpy 2.4.6`` or ""."""
    since = _SINCE_ONLY.match(message.strip())
    if since:
        return f"{written} is deprecated{where} (since {since.group(1)})"
    if message.strip() == "deprecated":
        return f"{written} is deprecated{where}"
    return f"{written} is deprecated{where}: {first_sentences(message)}"


def decoding_index(index, settings):
    """The index a decode is constrained by under `settings`: `index` itself, or
    `WithoutDeprecated` of it when ``avoidDeprecated`` is on (None stays None)."""
    if index is None or not getattr(settings, "avoid_deprecated", False):
        return index
    return WithoutDeprecated(index)


class WithoutDeprecated(APIIndex):
    """`index` without the members that announce their deprecation: `members` leaves them
    out, `submodules` leaves out the modules the parent's members mark deprecated, and
    `absence` names the deprecation of a member that is missing only for that reason.
    Everything else is `index`'s."""

    def __init__(self, index: APIIndex):
        self.index = index
        #: path -> (the answer of `index`, the same without deprecated members)
        self._filtered: dict[tuple[str, ...], tuple[Mapping[str, Member], Mapping[str, Member]]] = {}

    @property
    def source(self) -> str:  # type: ignore[override]
        return self.index.source

    @property
    def problem(self) -> str:  # type: ignore[override]
        return self.index.problem

    def __getattr__(self, name: str):
        # what some indexes offer beyond APIIndex (describe, python, check_interpreter, ...)
        if name == "index":
            raise AttributeError(name)
        return getattr(self.index, name)

    def members(self, path: tuple[str, ...]) -> Mapping[str, Member] | None:
        path = tuple(path)
        answer = self.index.members(path)
        if answer is None:
            return None
        cached = self._filtered.get(path)
        if cached is not None and cached[0] is answer:
            return cached[1]
        if not any(member.deprecated for member in answer.values()):
            kept = answer
        else:
            kept = {name: member for name, member in answer.items() if not member.deprecated}
        self._filtered[path] = (answer, kept)
        return kept

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        path = tuple(path)
        found = self.index.submodules(path)
        if not found or not path or not self.index.ready(members_key(path)):
            return found
        members = self.index.members(path) or {}
        deprecated = {name for name, member in members.items() if member.deprecated}
        return frozenset(found) - deprecated if deprecated & frozenset(found) else found

    def absence(self, path: tuple[str, ...], name: str, keyword: bool = False) -> str | None:
        if not keyword:
            message = self._deprecation(tuple(path), name)
            if message:
                return f"deprecated: {first_sentences(message)} (avoidDeprecated is on)"
        return self.index.absence(path, name, keyword)

    def _deprecation(self, path: tuple[str, ...], name: str) -> str:
        try:
            members = self.index.members(path) if self.index.ready(members_key(path)) else None
        except Exception:  # noqa: BLE001 - the note only decorates a message
            return ""
        member = members.get(name) if members else None
        return member.deprecated if member is not None else ""

    # -- the rest is the index's ---------------------------------------------------------
    def signature(self, key: tuple[str, ...]) -> Signature | None:
        return self.index.signature(key)

    def packages(self) -> dict[str, str]:
        return self.index.packages()

    def lacking(self, path: tuple[str, ...], name: str, keyword: bool = False):
        return self.index.lacking(path, name, keyword)

    def deprecated_in(self, path: tuple[str, ...], name: str):
        return self.index.deprecated_in(path, name)

    def ready(self, path: tuple[str, ...]) -> bool:
        return self.index.ready(path)

    def prefetch(self, path: tuple[str, ...]) -> None:
        self.index.prefetch(path)

    def wait_ready(self, paths, timeout_s: float) -> bool:
        return self.index.wait_ready(paths, timeout_s)

    def work_seconds(self) -> float:
        return self.index.work_seconds()

    def progress(self, root: str) -> tuple[int, int] | None:
        return self.index.progress(root)

    def has_root(self, module: str) -> bool:
        return self.index.has_root(module)
