"""Deprecated, not yet removed: which members announce their deprecation (the
introspection worker, the index, its disk cache, snapshots and version targets), the
checker's hints, and completions that treat them as absent (setting avoidDeprecated).

References come from running code: a member the index calls deprecated warns with a
DeprecationWarning when it is read or called (``-W error::DeprecationWarning`` makes the
flagged line raise), and the members it leaves alone do not.  Docstring directives are
the library's own word; they are held against the NumPy and fixture docstrings.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import pytest

from adaptrack_lsp.apis import introspect_worker as worker
from adaptrack_lsp.apis.deprecations import WithoutDeprecated, deprecation_note, first_sentences
from adaptrack_lsp.apis.index import CALL, Member
from adaptrack_lsp.apis.jedi_index import JediIndex
from adaptrack_lsp.apis.snapshot import SnapshotIndex, write_snapshot
from adaptrack_lsp.apis.static_index import StaticIndex
from adaptrack_lsp.apis.targets import TargetsIndex, intersect_members, snapshot_path, walk_environment
from adaptrack_lsp.checking.checker import Checker

from api_index_support import install_fake_package, make_fixture_venv, site_packages, venv_index

NUMPY = f"numpy {np.__version__}"


def warns_on(code: str, python: str = sys.executable) -> list[str]:
    """The DeprecationWarnings (category names) that running `code`'s last line emits
    in `python` (the lines before it run first, their warnings ignored)."""
    *setup, last = code.strip().splitlines()
    probe = (
        "import warnings, json\n" + "\n".join(setup) + "\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    {last}\n"
        "print(json.dumps([w.category.__name__ for w in caught if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))]))"
    )
    done = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# -- the worker: what the runtime says ------------------------------------------------------


def test_numpy_names_that_warn_when_read_are_deprecated_with_numpys_message():
    found: dict[str, str] = {}
    members = worker.public_members(np, deprecations=found, module_getattr=True)
    lib: dict[str, str] = {}
    worker.public_members(np.lib, deprecations=lib, module_getattr=True)
    # served by numpy's module __getattr__ (not in dir()): found from its source, kept by getattr
    assert "chararray" in members and "chararray" not in dir(np)
    assert found["chararray"].startswith("`np.chararray` is deprecated")
    assert lib["math"].startswith("`np.lib.math` is a deprecated alias")
    # the reference: reading them warns; reading the names left alone does not
    assert warns_on("import numpy as np\nnp.chararray") and warns_on("import numpy as np\nnp.lib.math")
    for name in ("zeros", "linalg", "ndarray", "float64", "histogram"):
        assert name not in found and not warns_on(f"import numpy as np\nnp.{name}"), name
    # names numpy's __getattr__ mentions only to raise (removed aliases) are not members
    assert "float" not in members and "distutils" not in members and "array_api" not in members


def test_numpy_core_members_are_deprecated_and_its_message_is_cut_to_a_sentence():
    found: dict[str, str] = {}
    worker.public_members(np.core, ["multiarray", "numeric"], deprecations=found)
    assert set(found) >= {"multiarray", "numeric"}
    assert warns_on("import numpy as np\nnp.core.multiarray")
    assert first_sentences(found["multiarray"]) == "numpy.core is deprecated and has been renamed to numpy._core."


def test_a_numpy_docstring_directive_deprecates_the_object_not_a_parameter():
    random: dict[str, str] = {}
    worker.public_members(np.random, deprecations=random)
    testing: dict[str, str] = {}
    worker.public_members(np.testing, deprecations=testing)
    assert random == {"random_integers": "deprecated since 1.11.0"}  # the directive has no body
    import numpy.typing

    assert worker.declared_deprecation(numpy.typing.NBitBase).startswith("Use `@typing.overload` or a `TypeVar`")
    assert testing["assert_warns"] == "This is deprecated. Use `warnings.catch_warnings` or `pytest.warns` instead."
    # the reference: calling them warns
    assert warns_on("import numpy as np\nnp.random.random_integers(1, 3)")
    assert warns_on("import numpy as np, warnings\nnp.testing.assert_warns(UserWarning, warnings.warn, 'x', UserWarning)")
    # directives indented under a parameter deprecate the parameter: these are not flagged,
    # and calling them with their defaults does not warn
    for name, call in (("fft.fftn", "np.fft.fftn(np.ones(4))"), ("fromstring", "np.fromstring('1 2', sep=' ')")):
        owner, _, leaf = ("numpy." + name).rpartition(".")
        obj = getattr(worker.resolve(owner.split(".")), leaf)
        assert ".. deprecated::" in obj.__doc__ and worker.declared_deprecation(obj) == "", name
        assert not warns_on(f"import numpy as np\n{call}"), name


def test_docstring_directives_count_at_the_level_of_the_summary_before_any_section():
    about_object = '''
        Add things.

        .. deprecated:: 3.0.0
            Use ``new_func`` instead.

        Longer text.
        '''
    assert worker.docstring_deprecation(about_object) == "Use `new_func` instead."
    assert worker.docstring_deprecation("Summary.\n\n    .. deprecated:: 2.0\n") == "deprecated since 2.0"
    roles = "Summary.\n\n    .. deprecated:: 3.0\n\n        Use :class:`~pkg.Frame` instead.\n\n        More.\n"
    assert worker.docstring_deprecation(roles) == "Use `pkg.Frame` instead."
    under_parameter = "Summary.\n\n    Parameters\n    ----------\n    a : int\n        .. deprecated:: 1.0\n            Do not.\n"
    assert worker.docstring_deprecation(under_parameter) == ""
    later_section = "Module.\n\nPlugin\n------\n\n.. deprecated:: 2.3\n    The plugin is deprecated.\n"
    assert worker.docstring_deprecation(later_section) == ""  # numpy.typing's module docstring
    import numpy.typing

    assert ".. deprecated::" in numpy.typing.__doc__ and worker.declared_deprecation(numpy.typing) == ""
    # SciPy's positional-arguments decorator: the arguments, not the function
    positional = "Summary.\n\n.. deprecated:: 1.19.0\n    Use of argument(s) ``{'maxiter'}`` by position is deprecated.\n"
    assert worker.docstring_deprecation(positional) == ""


def test_pandas_deprecate_wrapper_layout_is_read():
    """pandas' ``util._decorators.deprecate`` puts the directive after the summary, at the
    summary's indentation, with the rest of the docstring dedented below it (this builds
    the docstring the way pandas 3.1 does)."""
    alternative_doc = "\n    Add things.\n\n    Longer text.\n\n    Parameters\n    ----------\n    a : int\n    "
    empty1, summary, empty2, rest = alternative_doc.split("\n", 3)
    doc = textwrap.dedent(
        f"""
        {summary.strip()}

        .. deprecated:: 3.0.0
            Use `new_func` instead.

        {textwrap.dedent(rest)}"""
    )
    assert worker.docstring_deprecation(doc) == "Use `new_func` instead."


def test_pep_702_marks_are_read_from_the_object_itself(tmp_path, monkeypatch):
    typing_extensions = pytest.importorskip("typing_extensions")
    assert hasattr(typing_extensions, "deprecated")
    (tmp_path / "pep702_module.py").write_text(FIXTURE_V2, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pep702_module as module
    found: dict[str, str] = {}
    members = worker.public_members(module, deprecations=found, module_getattr=True)
    assert found == {
        "old": "old() is deprecated; use new()",
        "OldFrame": "OldFrame is deprecated; use Frame",
        "Legacy": "Use `Frame` instead.",
        "old_alias": "deppkg.old_alias is deprecated; use deppkg.new",
    }
    assert "old_alias" in members and "loaded" in members  # served by the module's __getattr__
    # a subclass of a deprecated class inherits __deprecated__ but is not deprecated itself
    assert module.NewerFrame.__deprecated__ and "NewerFrame" not in found
    # an instance's __doc__ is its type's: DEFAULT is not deprecated though Legacy is
    assert "DEFAULT" in members and module.DEFAULT.__doc__ is module.Legacy.__doc__ and "DEFAULT" not in found
    instance: dict[str, str] = {}
    worker.instance_members(module.Frame, instance)
    assert instance == {"append": "Frame.append is deprecated; use concat", "size": "Frame.size is deprecated; use len()"}


def test_which_warnings_announce_a_deprecation():
    class VisibleDeprecationWarning(UserWarning):  # NumPy's kind: not a DeprecationWarning subclass
        pass

    assert worker._is_deprecation(DeprecationWarning, "x") and worker._is_deprecation(PendingDeprecationWarning, "x")
    assert worker._is_deprecation(VisibleDeprecationWarning, "x")
    assert worker._is_deprecation(FutureWarning, "f is deprecated and will be removed")
    assert not worker._is_deprecation(FutureWarning, "the default will change") and not worker._is_deprecation(UserWarning, "deprecated")


# -- a package installed in an environment: the sandboxed worker, the disk cache, snapshots ----

FIXTURE_V1 = '''
"""deppkg 1.0: nothing is deprecated yet."""


def new(x):
    return x


def old(x):
    return x


class Frame:
    def head(self):
        return self

    def append(self, row):
        return self

    @property
    def size(self):
        return 0


class OldFrame(Frame):
    pass


class NewerFrame(OldFrame):
    pass


class Legacy:
    """A class kept for compatibility."""
'''

FIXTURE_V2 = '''
"""deppkg 2.0: APIs that announce their deprecation in each way the runtime can read."""

import warnings

from typing_extensions import deprecated


def new(x):
    return x


@deprecated("old() is deprecated; use new()")
def old(x):
    return x


class Frame:
    def head(self):
        return self

    @deprecated("Frame.append is deprecated; use concat")
    def append(self, row):
        return self

    @property
    @deprecated("Frame.size is deprecated; use len()")
    def size(self):
        return 0


@deprecated("OldFrame is deprecated; use Frame")
class OldFrame(Frame):
    pass


with warnings.catch_warnings():
    warnings.simplefilter("ignore")

    class NewerFrame(OldFrame):
        pass


class Legacy:
    """A class kept for compatibility.

    .. deprecated:: 2.0
        Use `Frame` instead.

    Parameters
    ----------
    size : int
        .. deprecated:: 1.5
            Passing size is deprecated.
    """


#: an instance: its __doc__ is its type's, which says nothing about this name
DEFAULT = Legacy()


def _load_helper():
    warnings.warn("an internal helper is deprecated", DeprecationWarning, stacklevel=1)
    return new


def __getattr__(name):
    if name == "old_alias":
        warnings.warn("deppkg.old_alias is deprecated; use deppkg.new", DeprecationWarning, stacklevel=2)
        return new
    if name == "loaded":  # warns from inside, about something else
        return _load_helper()
    raise AttributeError(name)
'''


@pytest.fixture(scope="module")
def deppkg(tmp_path_factory):
    """A venv (standard library + typing_extensions, copied in) with deppkg 2.0, and the
    snapshots of deppkg 1.0 and 2.0 walked there."""
    typing_extensions = pytest.importorskip("typing_extensions")
    python = make_fixture_venv(tmp_path_factory.mktemp("depenv") / "env")
    shutil.copy(typing_extensions.__file__, site_packages(python) / "typing_extensions.py")
    snapshots = {}
    for version, source in (("1.0", FIXTURE_V1), ("2.0", FIXTURE_V2)):
        install_fake_package(python, "deppkg", version, source)
        snapshots[version] = walk_environment(python, "deppkg", version)
    return python, snapshots


def test_reference_the_fixture_warns_where_it_says_it_is_deprecated(deppkg):
    python, _ = deppkg
    for deprecated_use in ("deppkg.old(1)", "deppkg.OldFrame()", "deppkg.old_alias", "deppkg.Frame().append(1)", "deppkg.Frame().size"):
        assert warns_on(f"import deppkg\n{deprecated_use}", python), deprecated_use
    for fine in ("deppkg.new(1)", "deppkg.NewerFrame()", "deppkg.Frame().head()", "deppkg.Legacy()", "deppkg.DEFAULT"):
        assert not warns_on(f"import deppkg\n{fine}", python), fine
    # reading deppkg.loaded warns too, but from inside the library about something else
    assert warns_on("import deppkg\ndeppkg.loaded", python)


def test_the_sandboxed_worker_and_the_disk_cache_carry_the_messages(deppkg):
    python, _ = deppkg
    cache = tempfile.mkdtemp(prefix="adaptrack-deprecations-")
    try:
        index = JediIndex(python=python, timeout_s=300, runtime_timeout_s=300, cache_dir=cache)
        try:
            top = index.members(("deppkg",))
            frame = index.members(("deppkg", "Frame", CALL))
        finally:
            index.close()
        assert top["old"].deprecated == "old() is deprecated; use new()"
        assert top["old_alias"].deprecated.startswith("deppkg.old_alias is deprecated")
        assert top["Legacy"].deprecated == "Use `Frame` instead."
        assert top["OldFrame"].deprecated and not top["NewerFrame"].deprecated
        assert not top["new"].deprecated and not top["Frame"].deprecated and not top["DEFAULT"].deprecated
        assert "loaded" in top and not top["loaded"].deprecated  # the warning is not addressed to the reader
        assert frame["append"].deprecated == "Frame.append is deprecated; use concat" and not frame["head"].deprecated
        assert frame["size"].deprecated == "Frame.size is deprecated; use len()"
        # a new process answers from the disk cache, messages included, without the worker
        again = JediIndex(python=python, timeout_s=300, runtime_timeout_s=300, cache_dir=cache)
        try:
            assert again.members(("deppkg",)) == top and again.members(("deppkg", "Frame", CALL)) == frame
            assert again._introspector is None
        finally:
            again.close()
        # jedi alone (no runtime introspection) leaves deprecation undecided: none is reported
        static = JediIndex(python=python, timeout_s=300, runtime_introspection=False, cache_dir=None)
        try:
            answer = static.members(("deppkg",))
            assert {"old", "Legacy", "new"} <= set(answer) and not any(m.deprecated for m in answer.values())
        finally:
            static.close()
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_the_walk_writes_deprecations_and_the_snapshot_reads_them(deppkg, tmp_path):
    _, snapshots = deppkg
    data = snapshots["2.0"]
    assert data["format"] == worker.WALK_FORMAT == 5
    assert data["deprecated"]["deppkg.old"] == "old() is deprecated; use new()"
    assert "deppkg.new" not in data["deprecated"] and snapshots["1.0"]["deprecated"] == {}
    assert data["classes"]["deppkg.Frame"]["deprecated"] == {
        "append": "Frame.append is deprecated; use concat",
        "size": "Frame.size is deprecated; use len()",
    }
    path = tmp_path / "deppkg.json.gz"
    write_snapshot(data, path)
    index = SnapshotIndex(path)
    assert index.members(("deppkg",))["old"].deprecated == "old() is deprecated; use new()"
    assert index.members(("deppkg", "Frame", CALL))["append"].deprecated.startswith("Frame.append")
    assert not index.members(("deppkg",))["new"].deprecated


def test_version_targets_name_the_versions_that_deprecate_a_member(deppkg, monkeypatch, tmp_path):
    _, snapshots = deppkg
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path / "cache"))
    for version, data in snapshots.items():
        path = snapshot_path("deppkg", version)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_snapshot(data, path)
    live = SnapshotIndex(data=snapshots["2.0"])  # the installed version
    index = TargetsIndex(live, ["deppkg==1.0"])
    assert index.prepare() == ""
    assert index.members(("deppkg",))["old"].deprecated  # deprecated in some version: deprecated
    assert index.deprecated_in(("deppkg",), "old") == ("deppkg", ["2.0"])
    assert index.deprecated_in(("deppkg",), "new") is None
    checker = Checker(index)
    (finding,) = checker.check("import deppkg\ndeppkg.old(1)\n").findings
    assert finding.kind == "deprecated" and finding.deprecated and finding.targets == ("deppkg 2.0",)
    assert finding.message == "deppkg.old is deprecated in deppkg 2.0: old() is deprecated; use new()"


def test_intersection_keeps_a_deprecation_from_any_version():
    old = {"f": Member("f", "function", False), "g": Member("g", "function", False)}
    new = {"f": Member("f", "function", False, "use g"), "g": Member("g", "function", False)}
    both = intersect_members([old, new])
    assert both["f"].deprecated == "use g" and not both["g"].deprecated
    assert Member.from_list("f", both["f"].to_list()) == both["f"] and both["g"].to_list() == ["function", False]


# -- the checker -------------------------------------------------------------------------------

DEPRECATED_USES = [
    # (document, the name as written, the flagged text)
    ("import numpy as np\nx = np.chararray\n", "np.chararray", "chararray"),
    ("import numpy as np\nx = np.lib.math.pi\n", "np.lib.math", "math"),
    ("from numpy.lib import math\n", "numpy.lib.math", "math"),
    ("import numpy as np\nm = np.core.multiarray\n", "np.core.multiarray", "multiarray"),
    ("import numpy as np\nr = np.random.random_integers(1, 3)\n", "np.random.random_integers", "random_integers"),
    ("import numpy as np\ns = np.random.RandomState(0).random_integers(1, 3)\n", "np.random.RandomState(0).random_integers", "random_integers"),
    ("import numpy as np, warnings\nnp.testing.assert_warns(UserWarning, warnings.warn, 'x', UserWarning)\n", "np.testing.assert_warns", "assert_warns"),
]


@pytest.fixture(scope="module")
def checker():
    return Checker(venv_index())


@pytest.mark.parametrize(("code", "name", "flagged"), DEPRECATED_USES, ids=[case[1] for case in DEPRECATED_USES])
def test_each_deprecation_hint_is_a_line_that_warns_here(checker, code, name, flagged):
    found = checker.check(code).findings
    assert [(f.kind, f.name, f.deprecated) for f in found] == [("deprecated", name, True)]
    finding = found[0]
    assert finding.targets == (NUMPY,) and finding.message.startswith(f"{name} is deprecated in {NUMPY}")
    assert code[finding.start : finding.end] == flagged
    # the reference: with DeprecationWarning an error, the flagged line raises it
    ran = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.returncode != 0 and "DeprecationWarning" in ran.stderr.splitlines()[-1], ran.stderr
    frames = re.findall(r'File "<string>", line (\d+)', ran.stderr)
    assert frames and int(frames[-1]) == finding.line, ran.stderr


def test_the_cli_example_in_the_docs(tmp_path):
    """docs/check.md#deprecations: the file and the output shown are what `check` prints;
    deprecations alone exit 0; `--no-deprecated` leaves them out."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "check.md").read_text(encoding="utf-8")
    section = page[page.index("## Deprecations") :]
    block = section[section.index("```console\n") + len("```console\n") : section.index("\n```", section.index("```console"))]
    source, output = block.split("$ adaptrack-lsp check legacy.py\n")
    (tmp_path / "legacy.py").write_text(source.removeprefix("$ cat legacy.py\n"))
    run = [sys.executable, "-m", "adaptrack_lsp", "check"]
    done = subprocess.run([*run, "legacy.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.splitlines() == output.splitlines(), (done.stdout, done.stderr)
    quiet = subprocess.run([*run, "--no-deprecated", "legacy.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0 and "deprecated" not in quiet.stdout, quiet.stdout


def test_code_without_deprecated_uses_has_no_hints_and_runs_with_warnings_as_errors(checker):
    code = "import numpy as np\nx = np.zeros(4).sum()\ny = np.linalg.norm(np.ones(2))\nz = np.fft.fftn(np.ones(4))\nfrom numpy import lib\n"
    assert checker.check(code).findings == []
    ran = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr


def test_a_deprecated_use_under_a_warnings_guard_is_not_reported(checker):
    code = "import warnings\nimport numpy as np\nwith warnings.catch_warnings():\n    x = np.chararray\n"
    assert checker.check(code).findings == []


def test_hint_messages():
    assert deprecation_note("np.f", " in numpy 2.4.6", "deprecated since 1.11.0") == "np.f is deprecated in numpy 2.4.6 (since 1.11.0)"
    assert deprecation_note("f", "", "One. Two.") == "f is deprecated: One. Two."
    long = "First sentence is here. " + "X" * 200 + "."
    assert first_sentences(long) == "First sentence is here."
    assert first_sentences("y" * 300).endswith("…") and len(first_sentences("y" * 300)) == 200


# -- avoidDeprecated: completions treat deprecated members as absent ---------------------------

TOKENS = ["<eos>", ".", "old", "new", "(", ")", "\n", "import", " ", "fakelib", "y", "="]
DOCUMENT = "import fakelib\ny = fakelib."


def old_loving_model():
    """An exact tabular model that writes ``old()`` after ``fakelib.`` (p 0.7) before
    ``new()`` (p 0.25)."""
    from adaptrack_lsp.completion.lm.tabular import TabularLM
    from adaptrack_lsp.vocab import Vocabulary

    vocab = Vocabulary.from_strings(TOKENS, eos="<eos>")
    index = {token: i for i, token in enumerate(TOKENS)}
    following = {"": {"old": 0.7, "new": 0.25}, "old": {"(": 0.9}, "new": {"(": 0.9}, "old(": {")": 0.9}, "new(": {")": 0.9}}

    def conditional(path):
        probs = np.full(len(TOKENS), 1e-3)
        if not path:  # the healed "." may come first
            probs[index["."]] = 0.3
        text = "".join(TOKENS[i] for i in path).removeprefix(".")
        for token, p in following.get(text, {"<eos>": 0.9}).items():
            probs[index[token]] += p
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


FAKELIB = StaticIndex(["fakelib.old", "fakelib.new"], deprecated={"fakelib.old": "old is deprecated; use new"})


@pytest.mark.parametrize("decoder", ["adaptrack", "exact"])
def test_avoid_deprecated_never_writes_a_deprecated_member(decoder):
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings

    settings = Settings(model="tabular", timeout_ms=60_000, max_new_tokens=6, num_samples=24, decoder=decoder, list_decoder=decoder)
    service = CompletionService(settings, model_loader=lambda s, progress: old_loving_model(), index_factory=lambda s, root: FAKELIB)
    service.load()
    try:
        texts = {}
        for avoid in (False, True):
            chosen = settings.replace(avoid_deprecated=avoid)
            listed = service.complete(DOCUMENT, len(DOCUMENT), mode="list", seed=5, settings=chosen)
            ghost = service.complete(DOCUMENT, len(DOCUMENT), mode="inline", seed=5, settings=chosen)
            texts[avoid] = ([c.text for c in listed.candidates], [c.text for c in ghost.candidates])
    finally:
        service.close()
    listed_off, ghost_off = texts[False]
    listed_on, ghost_on = texts[True]
    assert listed_off[0] == "old()" and ghost_off == ["old()"]  # what the model prefers, setting off
    assert listed_on and not any("old" in text for text in listed_on) and "new()" in listed_on
    assert ghost_on == ["new()"]


def test_the_view_drops_deprecated_members_and_says_why_one_is_missing():
    view = WithoutDeprecated(FAKELIB)
    assert set(view.members(("fakelib",))) == {"new"} and set(FAKELIB.members(("fakelib",))) == {"old", "new"}
    assert view.absence(("fakelib",), "old") == "deprecated: old is deprecated; use new (avoidDeprecated is on)"
    assert view.absence(("fakelib",), "nothing") is None
    assert view.members(("fakelib",)) is view.members(("fakelib",))  # filtered once per answer


def test_explain_with_avoid_deprecated_rejects_a_deprecated_numpy_name(tmp_path, capsys, monkeypatch):
    from adaptrack_lsp.cli import build_parser

    def explain(*extra):
        args = build_parser().parse_args(["explain", str(source), "--python", sys.executable, "--constraints", "api", "--json", "--text", text, *extra])
        assert args._module.run(args) == 0
        return json.loads(capsys.readouterr().out)

    monkeypatch.chdir(tmp_path)
    source = tmp_path / "use.py"
    source.write_text("import numpy as np\n")
    text = "x = np.chararray"
    assert explain()["accepted"] is True
    verdict = explain("--avoid-deprecated")
    assert verdict["accepted"] is False and verdict["offset"] == len("x = np.chara")  # np.char, np.character are not deprecated
    assert verdict["reason"].startswith("np.chararray: deprecated: `np.chararray` is deprecated")
    assert verdict["reason"].endswith("(avoidDeprecated is on)")


def test_the_worker_module_stays_standard_library_only():
    source = inspect.getsource(worker)
    imported = set(re.findall(r"^(?:import|from) (\w+)", source, re.M))
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
