"""Name-based factory of model backends: the `backend` setting -> the loader that builds
the `LanguageModel`.

Each entry names a module and a function ``load(settings, progress) -> LanguageModel``;
the module is imported only when its backend is used (heavy imports stay inside it).
Adding an engine is one module plus one line here (and its name in
`config.BACKENDS`).
"""

from __future__ import annotations

import importlib

from adaptrack_lsp.completion.lm.base import ModelError
from adaptrack_lsp.config import BACKENDS

#: backend name -> "module:function"
LOADERS: dict[str, str] = {
    "transformers": "adaptrack_lsp.completion.lm.loading:load_for_settings",
    "llamacpp": "adaptrack_lsp.completion.lm.llamacpp:load_for_settings",
    "server": "adaptrack_lsp.completion.lm.server:load_server_model",
}
assert tuple(LOADERS) == BACKENDS, "config.BACKENDS and the backend registry disagree"


def load_backend(settings, progress=None):
    """The model of `settings.backend` for `settings`; `ModelError` names the fix."""
    progress = progress or (lambda message, percentage=None: None)
    target = LOADERS.get(settings.backend)
    if target is None:
        raise ModelError(f"unknown backend {settings.backend!r}; choose one of: {', '.join(LOADERS)}")
    module_name, _, function = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ModelError(f"the {settings.backend} backend is not available: {error}") from error
    return getattr(module, function)(settings, progress)
