"""parso's on-disk parse cache, made safe against a process killed while it writes.

parso (under jedi) pickles every parsed file to its cache directory by truncating the
file and writing into it.  A server killed in the middle (the editor closing, a time
limit) leaves a truncated pickle, and from then on every look-up through that file
raises ``EOFError: Ran out of input``: numpy's ``__init__.pyi`` broken that way makes all
of numpy unknown until the file is deleted by hand.  Here saves go to a temporary file
renamed into place (a reader sees the old file or the new one, never half of one), and a
cache file that cannot be loaded counts as a miss: it is removed and the source parsed
again.  Installed once per process by `make_crash_safe`; a parso without these
functions is left as it is.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile

log = logging.getLogger(__name__)

_INSTALLED = False


def make_crash_safe() -> bool:
    """Install the safe save and load into parso's cache module; True once installed."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        import parso.cache as parso_cache
    except ImportError:  # pragma: no cover - jedi depends on parso
        return False
    original_load = getattr(parso_cache, "_load_from_file_system", None)
    hashed_path = getattr(parso_cache, "_get_hashed_path", None)
    if original_load is None or hashed_path is None or not hasattr(parso_cache, "_save_to_file_system"):
        log.debug("this parso has no _load_from_file_system/_save_to_file_system; its disk cache is used as it is")
        return False

    def save_whole_file(hashed_grammar, path, item, cache_path=None):
        target = hashed_path(hashed_grammar, path, cache_path=cache_path)
        handle, partial = tempfile.mkstemp(prefix=".partial-", suffix=".pkl", dir=os.path.dirname(target))
        try:
            with os.fdopen(handle, "wb") as file:
                pickle.dump(item, file, pickle.HIGHEST_PROTOCOL)
            os.replace(partial, target)
        except BaseException:
            try:
                os.unlink(partial)
            except OSError:
                pass
            raise

    def load_or_forget(hashed_grammar, path, p_time, cache_path=None):
        try:
            return original_load(hashed_grammar, path, p_time, cache_path=cache_path)
        except (MemoryError, RecursionError):
            raise
        except Exception as error:  # any unreadable pickle is a cache miss
            target = hashed_path(hashed_grammar, path, cache_path=cache_path)
            log.warning("parso cache file %s for %s is unreadable (%s: %s); removed, the file is parsed again", target, path, type(error).__name__, error)
            try:
                os.unlink(target)
            except OSError:
                pass
            return None

    parso_cache._save_to_file_system = save_whole_file
    parso_cache._load_from_file_system = load_or_forget
    _INSTALLED = True
    return True
