"""The checker of texts at cursors: whether the constraints a completion would get accept
a text after a prefix, and if not, the first rejected character and why.

`Explainer` builds the constraint completions get (`constrainers.environment.text_constraint`)
from the document, the cursor and the settings, with the API index of the settings (version
targets prepared once), and checks a text one character at a time (`check_text`).  `PARTS`
names the parts a check can use.  Surfaces: `adaptrack-lsp explain` (`commands/explain.py`),
GitChameleon's evaluation and the benchmarks.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_WORD = re.compile(r"\w*")

#: the parts `--constraints` can name -> what each adds to `text_constraint`'s arguments,
#: given the API index view of the request (None when no index is available)
PARTS: dict[str, Callable[[object], dict]] = {
    "clean": lambda index: {"clean": True},
    "api": lambda index: {"index": index},
    "syntax": lambda index: {"syntax": True},
    "kwargs": lambda index: {"keywords_index": index},
}


def default_parts(settings) -> list[str]:
    """The parts a completion gets with `settings` (a constrained decoder): clean text and
    the API constraint always, keyword names when `keywordArguments` is on, Python syntax
    when `syntaxConstraint` is on."""
    return (
        ["clean", "api"]
        + (["kwargs"] if settings.keyword_arguments else [])
        + (["syntax"] if settings.syntax_constraint else [])
    )


def parse_parts(value: str | None, settings) -> list[str]:
    """The parts named by `--constraints` (comma-separated); ValueError names unknown ones."""
    if value is None:
        return default_parts(settings)
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        raise ValueError(f"unknown constraint {', '.join(map(repr, unknown))} (known: {', '.join(PARTS)})")
    if not names:
        raise ValueError(f"--constraints names no constraint (known: {', '.join(PARTS)})")
    return list(dict.fromkeys(names))


class Explainer:
    """Checks texts at cursors with the constraint completions would get."""

    def __init__(self, settings, parts: list[str], workspace_root: str | None = None, progress: Callable[[str], None] | None = None,
                 target_progress: Callable[[str], None] | None = None, strict_targets: bool = False):
        from adaptrack_lsp.constrainers.environment import ConstraintEnvironment

        self.settings = settings
        self.parts = parts
        self.environment = ConstraintEnvironment(workspace_root)
        self.environment.target_progress = target_progress
        self.environment.strict_targets = strict_targets
        self.progress = progress
        self.index = None
        #: why the API part is missing although asked for ("" when fine)
        self.problem = ""
        if "api" in parts or "kwargs" in parts:
            self.index, info = self.environment.api_index(settings)
            self.problem = info.problem
            prepare = getattr(self.index, "prepare", None)  # version targets: built or read here, once
            if callable(prepare):
                self.problem = prepare()
            check = getattr(self.index, "check_interpreter", None)
            if not self.problem and check is not None:
                self.problem = check()

    def close(self) -> None:
        self.environment.close()

    def explain(self, prefix: str, text: str, suffix: str = "", path: str = "") -> dict:
        """The verdict for `text` after `prefix` (and before `suffix`) in the file `path`
        (its folder's modules are importable; "" for none)."""
        from adaptrack_lsp.completion.request import CompletionRequest

        request = CompletionRequest.build(prefix + suffix, len(prefix), settings=self.settings, document=path)
        unchecked_before = set(getattr(self.index, "unchecked_modules", None) or ())
        verdict = self._explain(request, prefix, text, suffix)
        unchecked = getattr(self.index, "unchecked_modules", None) or {}
        new = [unchecked[module] for module in sorted(unchecked) if module not in unchecked_before]
        if new:
            verdict["unchecked"] = new
        return verdict

    def _explain(self, request, prefix: str, text: str, suffix: str) -> dict:
        from adaptrack_lsp.apis.deprecations import decoding_index
        from adaptrack_lsp.apis.ready_index import ReadyOnlyIndex
        from adaptrack_lsp.completion.pipeline import wait_for_paths
        from adaptrack_lsp.constrainers.environment import text_constraint

        given_up: set = set()
        if self.index is not None:
            wait_for_paths(self.index, request.needed_paths, given_up, self.progress)
        while True:
            view = (
                ReadyOnlyIndex(decoding_index(self.index, self.settings), unknown=given_up, wait_optional=True)
                if self.index is not None
                else None
            )
            arguments: dict = {}
            for part in self.parts:
                arguments.update(PARTS[part](view))
            constraint = text_constraint(
                document=prefix + suffix, prefix=prefix, roots=request.bound_names, local_modules=request.local_modules, assigned_attributes=request.assigned_attributes, suffix=suffix, analysis=request.analysis, **arguments
            )
            verdict = check_text(constraint, text)
            if view is None or not view.pending:
                return verdict
            wait_for_paths(self.index, view.pending, given_up, self.progress)


def check_text(constraint, text: str) -> dict:
    """`{"accepted", "complete", "offset", "reason"}` for `text` under a `TextConstraint`."""
    notes = [f"{note.split(':', 1)[0]} check off: {note.split(':', 1)[1].strip()}" for note in constraint.off]
    constrainer = constraint.constrainer
    if constrainer is None:
        return {"accepted": True, "complete": True, "offset": None, "reason": "; ".join(notes) or "no constraint is on"}
    state = constrainer.start(constraint.context)
    for offset, char in enumerate(text):
        following = constrainer.check(state, char)
        if following is None:
            # the reason sees the rejected character and the rest of the word it begins,
            # so that it can name the whole word ("tf.placeholder does not exist ...")
            word = char + (_WORD.match(text, offset + 1).group() if char.isidentifier() else "")
            return {"accepted": False, "complete": False, "offset": offset, "reason": constrainer.rejection(state, word)}
        state = following
    complete = bool(constrainer.is_complete(state))
    reason = "; ".join(notes)
    if not complete:
        reason = "; ".join(filter(None, ["accepted as a start, but the text cannot end here", reason]))
    return {"accepted": True, "complete": complete, "offset": None, "reason": reason}
