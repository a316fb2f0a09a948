"""Project context: which files' text a prompt carries (sources, pieces, safety) and how
the prompt builder fits and lays it out (budget, formats, a block that stays put)."""

from __future__ import annotations

import os
import string
import sys
import threading
from pathlib import Path

import pytest

from adaptrack_lsp.apis.document import DocumentAnalysis
from adaptrack_lsp.completion import project_context
from adaptrack_lsp.completion.context import PLAIN_FILE_HEADER, PromptBuilder, RepoFormat, detect_repo_format
from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.completion.project_context import (
    MAX_FILE_BYTES,
    ContextSources,
    ProjectContext,
    Snippet,
    document_imports,
    gather_context,
    module_outline,
)
from adaptrack_lsp.completion.request import CompletionRequest
from adaptrack_lsp.config import Settings
from adaptrack_lsp.vocab import Vocabulary

UTILS = '''"""Helpers."""
import json

DEFAULT_PATH = "settings.json"


def load_settings(path=DEFAULT_PATH):
    """Read the settings file."""
    with open(path) as handle:
        return json.load(handle)


def _private_helper(value):
    return value


class Report:
    """A report."""

    kind = "text"

    def __init__(self, title):
        self.title = title
        self.lines = []

    def add_line(self, line):
        self.lines.append(line)
        return self
'''
CONFIG = "SECRET_LEVEL = 3\n\n\ndef configure(level=SECRET_LEVEL):\n    return level\n"
MAIN = "from . import utils\nfrom .utils import Report\nimport pkg.config\n\nsettings = utils."


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(UTILS)
    (root / "pkg" / "config.py").write_text(CONFIG)
    (root / "pkg" / "main.py").write_text(MAIN)
    return root


class OpenAudit:
    """Files opened (and folders listed) under `folder` while active, from Python's audit
    events ("open", "os.listdir", "os.scandir"): what the process really read."""

    _hooked: list[OpenAudit] = []
    _lock = threading.Lock()

    def __init__(self, folder: Path):
        self.folder = str(folder)
        self.seen: list[str] = []
        if not OpenAudit._hooked:
            sys.addaudithook(OpenAudit._hook)
        OpenAudit._hooked.append(self)

    @staticmethod
    def _hook(event, args):
        if event not in ("open", "os.listdir", "os.scandir") or not args or args[0] is None:
            return
        try:
            path = os.fsdecode(args[0]) if not isinstance(args[0], int) else ""
        except TypeError:
            return
        for audit in list(OpenAudit._hooked):
            if path.startswith(audit.folder):
                audit.seen.append(path)

    def close(self):
        OpenAudit._hooked.remove(self)


@pytest.fixture
def audit(tmp_path):
    watcher = OpenAudit(tmp_path)
    yield watcher
    watcher.close()


def fresh_caches():
    project_context._FILE_CACHE.clear()


# -- sources --------------------------------------------------------------------------------
def test_imports_relative_absolute_and_from_are_read_with_tree_sitter():
    refs = document_imports("from .utils import a, b as c\nfrom .. import x\nimport pkg.mod as m\nfrom p.q import *\n'import no'\n")
    assert [(r.level, r.module, r.names, r.is_from) for r in refs] == [
        (1, ("utils",), ("a", "b"), True),
        (2, (), ("x",), True),
        (0, ("pkg", "mod"), (), False),
        (0, ("p", "q"), ("*",), True),
    ]


def test_trusted_workspace_gives_named_definitions_then_outlines_then_whole_files(workspace):
    fresh_caches()
    context = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(MAIN), ContextSources(str(workspace), True, ()))
    assert context.path == "pkg/main.py" and context.repo == "ws"
    kinds = [(s.path, s.kind) for s in context.snippets]
    # `from . import utils` names the module (its outline), `from .utils import Report` the
    # class body, `import pkg.config` the module; whole files come last
    assert kinds == [
        ("pkg/utils.py", "names"),
        ("pkg/utils.py", "names"),
        ("pkg/config.py", "names"),
        ("pkg/utils.py", "file"),
        ("pkg/config.py", "file"),
    ]
    outline, report, config = (s.text for s in context.snippets[:3])
    assert "def load_settings(path): ..." in outline and "return json.load" not in outline
    assert "class Report:" in outline and "    def add_line(self, line): ..." in outline
    assert "self.title = title" in report and "self.lines.append" not in report  # __init__ whole, methods elided
    assert "def configure(level): ..." in config
    assert context.snippets[3].text == UTILS


def test_aliases_ranking_by_use_and_star_re_exports(workspace):
    fresh_caches()
    (workspace / "pkg" / "_impl.py").write_text("def hidden_api(x):\n    return x\n")
    (workspace / "pkg" / "public.py").write_text("from ._impl import *\n")
    text = "import pkg.config as cfg\nfrom . import public\nfrom .utils import Report as R\n\nR.x\nR.y\nR.z\n"
    context = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(text), ContextSources(str(workspace), True, ()))
    names = [s for s in context.snippets if s.kind == "names"]
    # Report is used most (four times with its import): its module comes first
    assert [(s.path, s.aliases) for s in names] == [
        ("pkg/utils.py", (("Report", "R"),)),
        ("pkg/config.py", (("config", "cfg"),)),
        ("pkg/public.py", ()),
    ]
    assert "def hidden_api(x): ..." in names[2].text  # what `from ._impl import *` brings
    # the line being typed does not count: typing there never reorders the block
    typing = text + "y = cfg.a + cfg.b + cfg.c + cfg."
    sources = ContextSources(str(workspace), True, ())
    counted = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(typing), sources)
    assert counted.snippets[0].path == "pkg/config.py"  # the check can fail: counted, cfg ties and comes first
    kept = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(typing), sources, offset=len(typing))
    assert kept == context


def test_module_outline_has_one_line_per_definition_and_re_export():
    extra = (
        "\nfrom ._impl import (  # re-exported\n    a,\n    b as c,\n)\n\n\ndef long(\n    x,\n    y=1,\n) -> int:\n    return x\n"
        "\n\nasync def many(a, b: int, /, c=2, *args, d, **kw):\n    pass\n"
    )
    outline = module_outline(UTILS + extra)
    assert outline.outline.splitlines() == [
        'DEFAULT_PATH = "settings.json"',
        "def load_settings(path): ...",
        "def _private_helper(value): ...",
        "class Report:",
        '    kind = "text"',
        "    def __init__(self, title): ...",
        "    def add_line(self, line): ...",
        "from ._impl import (a, b as c)",
        "def long(x, y): ...",
        "async def many(a, b, /, c, ...): ...",
    ]
    assert set(outline.definitions) == {"DEFAULT_PATH", "load_settings", "_private_helper", "Report", "long", "many"}
    assert "with open(path)" in outline.definitions["load_settings"]  # short: whole


def test_an_open_document_wins_over_the_file_on_disk_and_other_open_documents_follow(workspace):
    fresh_caches()
    edited = UTILS.replace("def load_settings(", "def load_config(")
    scratch = workspace / "scratch.py"
    opened = ((str(workspace / "pkg" / "utils.py"), edited), (str(scratch), "def draft(x):\n    return x\n"))
    context = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(MAIN), ContextSources(str(workspace), True, opened))
    texts = "\n".join(s.text for s in context.snippets)
    assert "load_config" in texts and "load_settings" not in texts
    assert [(s.path, s.kind) for s in context.snippets if s.path == "scratch.py"] == [("scratch.py", "outline"), ("scratch.py", "file")]


def test_an_untrusted_workspace_reads_nothing_from_disk(workspace, audit):
    fresh_caches()
    main = str(workspace / "pkg" / "main.py")
    context = gather_context(main, DocumentAnalysis.parse(MAIN), ContextSources(str(workspace), False, ()))
    assert context is None and audit.seen == []
    # what the editor sent is used: the imported module open in the editor, no file read
    opened = ((str(workspace / "pkg" / "utils.py"), UTILS),)
    context = gather_context(main, DocumentAnalysis.parse(MAIN), ContextSources(str(workspace), False, opened))
    assert {s.path for s in context.snippets} == {"pkg/utils.py"} and audit.seen == []
    # the check detects a read: trusted, the same call opens the modules on disk
    gather_context(main, DocumentAnalysis.parse(MAIN), ContextSources(str(workspace), True, opened))
    assert str(workspace / "pkg" / "config.py") in audit.seen


def test_a_symlink_leaving_the_workspace_is_not_read(workspace, tmp_path, audit):
    fresh_caches()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("TOKEN = 'do-not-send'\n")
    (workspace / "pkg" / "secret.py").symlink_to(outside / "secret.py")
    (workspace / "pkg" / "linked").symlink_to(outside, target_is_directory=True)
    text = "from . import secret\nfrom .linked import secret as other\nimport pkg.config\n"
    audit.seen.clear()
    context = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(text), ContextSources(str(workspace), True, ()))
    assert "do-not-send" not in "".join(s.text for s in context.snippets)
    assert {s.path for s in context.snippets} == {"pkg/config.py"}
    assert not [p for p in audit.seen if p.startswith(str(outside))]
    # a link inside the workspace is followed
    (workspace / "pkg" / "alias.py").symlink_to(workspace / "pkg" / "config.py")
    context = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse("from . import alias\n"), ContextSources(str(workspace), True, ()))
    assert "SECRET_LEVEL" in context.snippets[0].text


def test_relative_imports_above_the_root_and_large_files_are_refused(workspace, tmp_path):
    fresh_caches()
    (tmp_path / "above.py").write_text("ABOVE = 1\n")
    (workspace / "pkg" / "big.py").write_text("X = 1\n" * (MAX_FILE_BYTES // 6 + 10))
    text = "from ... import above\nfrom . import big\nfrom . import utils\n"
    context = gather_context(str(workspace / "pkg" / "main.py"), DocumentAnalysis.parse(text), ContextSources(str(workspace), True, ()))
    assert {s.path for s in context.snippets} == {"pkg/utils.py"}


def test_a_request_carries_its_context_and_context_tokens_zero_turns_it_off(workspace):
    fresh_caches()
    sources = ContextSources(str(workspace), True, ())
    document = (workspace / "pkg" / "main.py").as_uri()
    request = CompletionRequest.build(MAIN, len(MAIN), document=document, sources=sources)
    assert request.context is not None and request.context.path == "pkg/main.py"
    off = CompletionRequest.build(MAIN, len(MAIN), document=document, sources=sources, settings=Settings(context_tokens=0))
    assert off.context is None
    assert CompletionRequest.build(MAIN, len(MAIN), document=document).context is None


# -- the prompt block ---------------------------------------------------------------------------
def make_vocab(extra=()) -> Vocabulary:
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    tokens = ["<eos>", *extra, *[t for t in dict.fromkeys(["def ", "class ", "    ", "# Path: ", "utils", "self"] + chars)]]
    return Vocabulary.from_strings(tokens, eos="<eos>")


def make_builder(vocab=None, **kwargs) -> PromptBuilder:
    vocab = vocab or make_vocab()
    lm = TabularLM(vocab, default=[1.0 / vocab.size] * vocab.size)
    return PromptBuilder(vocab=vocab, encode=lm.encode, **kwargs)


def small_context(*snippets) -> ProjectContext:
    return ProjectContext("pkg/main.py", "ws", tuple(snippets))


NAMES = Snippet("pkg/utils.py", "def load(path):\n    ...", "names", "pkg/utils.py")
OUTLINE = Snippet("pkg/other.py", "def other():\n    ...\nclass Thing:\n    ...", "outline", "pkg/other.py")
FILE = Snippet("pkg/utils.py", "import json\n\n\ndef load(path):\n    return json.load(path)\n", "file", "pkg/utils.py")


def test_plain_format_puts_path_lines_and_the_most_important_snippet_last():
    builder = make_builder(context_tokens=1000)
    document = "x = 1\ny = "
    plan = builder.build(document, len(document), context=small_context(NAMES, OUTLINE))
    text = builder.vocab.decode(plan.prompt_ids)
    assert text == (
        f"{PLAIN_FILE_HEADER}pkg/other.py\n{OUTLINE.text}\n\n{PLAIN_FILE_HEADER}pkg/utils.py\n{NAMES.text}\n\n"
        f"{PLAIN_FILE_HEADER}pkg/main.py\n{document}"
    )
    assert plan.context_snippets == (("pkg/other.py", "outline"), ("pkg/utils.py", "names"))
    assert plan.context_tokens == len(plan.prompt_ids) - len(builder.encode(document))
    # no context, or a zero budget: the prompt is the file alone, as before
    for plan in (builder.build(document, len(document)), make_builder().build(document, len(document), context=small_context(NAMES))):
        assert builder.vocab.decode(plan.prompt_ids) == document and plan.context_tokens == 0


def test_the_budget_is_kept_a_whole_file_replaces_its_pieces_and_long_pieces_are_cut():
    context = small_context(NAMES, OUTLINE, FILE)
    roomy = make_builder(context_tokens=2000)
    plan = roomy.build("x", 1, context=context)
    assert plan.context_snippets == (("pkg/utils.py", "file"), ("pkg/other.py", "outline"))
    for budget in (40, 60, 80, 120, 200):
        builder = make_builder(context_tokens=budget)
        plan = builder.build("x", 1, context=context)
        assert plan.context_tokens <= budget, budget
    # one piece takes at most a quarter of the budget (PIECE_SHARE), cut at a line end
    head = len(make_builder().encode(f"{PLAIN_FILE_HEADER}pkg/other.py\ndef other():\n    ...\n\n"))
    shared = make_builder(context_tokens=4 * (head + 2))
    plan = shared.build("x", 1, context=small_context(OUTLINE))
    text = shared.vocab.decode(plan.prompt_ids)
    assert plan.context_snippets == (("pkg/other.py", "outline"),) and "def other():" in text and "class Thing" not in text


def test_repository_format_for_qwen_and_starcoder():
    vocab = make_vocab(["<R>", "<F>", "<P>", "<S>", "<M>"])
    repo_id, sep_id, *fim_ids = (vocab.names.index(n) for n in ("<R>", "<F>", "<P>", "<S>", "<M>"))
    from adaptrack_lsp.completion.context import FIMFormat

    context = small_context(NAMES)
    qwen = make_builder(vocab, repo=RepoFormat("qwen", repo_id, sep_id), context_tokens=500)
    ids = qwen.build("a = 1\nb", 7, context=context).prompt_ids
    encode = qwen.encode
    assert ids == [repo_id, *encode("ws\n"), sep_id, *encode(f"pkg/utils.py\n{NAMES.text}\n"), sep_id, *encode("pkg/main.py\n"), *encode("a = 1\n")]
    fim = FIMFormat("starcoder", *fim_ids)
    star = make_builder(vocab, repo=RepoFormat("starcoder", repo_id, sep_id), fim=fim, context_tokens=500, heal=False)
    ids = star.build("a = 1\nb\nc = 2\n", 7, context=context).prompt_ids
    head = [repo_id, *encode("ws"), sep_id, *encode(f"pkg/utils.py\n{NAMES.text}\n"), sep_id, fim.prefix_id, *encode("pkg/main.py\n")]
    assert ids[: len(head)] == head and ids[len(head) :] == [*encode("a = 1\nb"), fim.suffix_id, *encode("\nc = 2\n"), fim.middle_id]


def test_the_automatic_budget_follows_the_model_and_fits_its_context():
    from adaptrack_lsp.completion.context import context_budget

    vocab = make_vocab()
    lm = TabularLM(vocab, default=[1.0 / vocab.size] * vocab.size)
    assert context_budget(lm, 48, None) == 1024 and context_budget(lm, 48, 0) == 0 and context_budget(lm, 48, 4000) == 4000
    lm.default_context_tokens = 2048  # the built-in model's
    assert context_budget(lm, 48, None) == 2048
    lm.max_context = 2048  # what the window (1536) and the new tokens leave
    assert context_budget(lm, 48, None) == 2048 - 48 - 1536 - 4


def test_the_tiny_models_tokenizer_has_the_qwen_repository_tokens():
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path())
    repo = detect_repo_format(tokenizer)
    assert repo == RepoFormat("qwen", tokenizer.convert_tokens_to_ids("<|repo_name|>"), tokenizer.convert_tokens_to_ids("<|file_sep|>"))
    assert detect_repo_format(None) is None


def test_the_block_stays_put_while_typing_at_the_end_of_a_file(workspace):
    """Keystrokes at the end of the file change only the prompt's last tokens: the context
    block and the window before the cursor line are the same ids (their KV state is reused)."""
    fresh_caches()
    builder = make_builder(context_tokens=400, max_prompt_tokens=300)
    sources = ContextSources(str(workspace), True, ())
    document = (workspace / "pkg" / "main.py").as_uri()
    text = MAIN.replace("settings = utils.", "\n".join(f"value_{i} = utils.load_settings({i})" for i in range(60)) + "\nsettings = utils.")
    previous = None
    for typed in ["", "l", "lo", "loa", "load", "load_", "load_s"]:
        request = CompletionRequest.build(text + typed, len(text + typed), document=document, sources=sources)
        plan = builder.build(request.text, request.offset, typed_word=request.typed_word, context=request.context)
        assert plan.context_tokens > 0 and plan.dropped_prefix_chars > 0
        if previous is not None:
            common = next((i for i, (a, b) in enumerate(zip(previous, plan.prompt_ids)) if a != b), min(len(previous), len(plan.prompt_ids)))
            assert len(plan.prompt_ids) - common <= 16, typed
        previous = plan.prompt_ids
