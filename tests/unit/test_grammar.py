"""The grammar constraint (llguidance): masks against independent references on tabular
and BPE vocabularies, states revisited after their matchers are evicted, the token-level
AND with the other constraints, every decoder, and bad input (syntax errors with line and
column, empty languages, rules that never finish, oversized and slow grammars,
pathological masks)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llguidance")

from adaptrack_lsp.completion.decoders import DecodeRequest, decoder_names, get_decoder
from adaptrack_lsp.constrainers.compose import TokenAllOf
from adaptrack_lsp.constrainers.environment import token_constraint
from adaptrack_lsp.constrainers.grammar import (
    MAX_GRAMMAR_CHARS,
    GrammarConstraint,
    GrammarError,
    GrammarLimitError,
    GrammarLimits,
    GrammarSpec,
    compile_grammar,
    grammar_constraint,
)
from adaptrack_lsp.constrainers.token_index import END
from adaptrack_lsp.evaluation.tasks import binary_task
from adaptrack_lsp.vocab import Vocabulary

ROOT = Path(__file__).resolve().parents[2]
GRAMMARS = ROOT / "tests" / "data" / "grammars"
BINARY = 'start: "00000" | "1" BIT BIT BIT BIT\nBIT: "0" | "1"'


def lark(text: str, source: str = "") -> GrammarSpec:
    return GrammarSpec("lark", text, source)


def reachable(constraint, vocab_size: int, depth: int):
    """(token path, state) for every state reachable in at most `depth` tokens."""
    out, stack = [], [((), constraint.initial_state())]
    while stack:
        path, state = stack.pop()
        out.append((path, state))
        if len(path) >= depth or state is END:
            continue
        for token_id in np.flatnonzero(constraint.mask(state)).tolist():
            child = constraint.advance(state, token_id)
            if child is not END:
                stack.append((path + (token_id,), child))
    return out


# -- masks against references ------------------------------------------------------------------------
def test_finite_language_masks_equal_the_prefixes_of_its_strings_over_overlapping_tokens():
    """Text-level validity: every tokenization of a valid text is valid (llguidance's
    forced-token shortcut would allow only the canonical one)."""
    language = ["ab", "abc", "ba", "bab", "cab"]
    tokens = ["a", "b", "c", "ab", "ba", "bc", "abc", "$"]
    vocab = Vocabulary.from_strings(tokens, "$")
    constraint = grammar_constraint(vocab, lark("start: " + " | ".join(f'"{w}"' for w in language)))
    checked = 0
    for path, state in reachable(constraint, vocab.size, 4):
        text = "".join(tokens[i] for i in path)
        expected = np.array(
            [any(w.startswith(text + t) for w in language) if t != "$" else text in language for t in tokens]
        )
        assert (constraint.mask(state) == expected).all(), text
        fresh = grammar_constraint(vocab, lark("start: " + " | ".join(f'"{w}"' for w in language)))
        state_fresh = fresh.initial_state()
        for token_id in path:
            state_fresh = fresh.advance(state_fresh, token_id)
        lazy = fresh.allowed(state_fresh, list(range(vocab.size)))  # validate_tokens, no mask
        assert (lazy == expected).all(), text
        checked += 1
    assert checked >= 12
    assert constraint.allowed(constraint.initial_state(), [0, 3, 6]).all()  # a, ab, abc all start "ab"/"abc"


def test_balanced_brackets_masks_equal_a_depth_counter():
    tokens = ["(", ")", "((", "))", "()", ")(", "$"]
    vocab = Vocabulary.from_strings(tokens, "$")
    constraint = grammar_constraint(vocab, lark('start: p+\np: "(" p* ")"'))

    def viable(text: str) -> bool:
        depth = 0
        for char in text:
            depth += 1 if char == "(" else -1
            if depth < 0:
                return False
        return True

    def complete(text: str) -> bool:
        return bool(text) and viable(text) and text.count("(") == text.count(")")

    states = reachable(constraint, vocab.size, 5)
    assert len(states) > 200
    for path, state in states:
        text = "".join(tokens[i] for i in path)
        expected = np.array([viable(text + t) if t != "$" else complete(text) for t in tokens])
        assert (constraint.mask(state) == expected).all(), text


@pytest.fixture(scope="module")
def tiny_vocab():
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    vocab = vocabulary_from_tokenizer(tokenizer, logits_size=len(tokenizer) + 7)  # padded logits
    return vocab, lambda text: tokenizer.encode(text, add_special_tokens=False)


def test_bpe_vocabulary_masks_equal_partial_regex_matching(tiny_vocab):
    """A regex grammar over the tiny model's byte-level BPE: at states along real
    tokenizations, every id's verdict equals Python's `regex` partial matching of the
    text so far plus the token's text; EOS iff a full match; padding and special ids never."""
    import regex

    vocab, encode = tiny_vocab
    pattern = r"[a-z]+(_[a-z]+)*\((x|y)?\)"
    constraint = grammar_constraint(vocab, GrammarSpec("regex", pattern))
    compiled = regex.compile(pattern)
    texts = vocab.texts
    for sample in ["get_item(x)", "load(y)", "a_b_c()"]:
        ids = encode(sample)
        state, prefix = constraint.initial_state(), ""
        for position in range(len(ids) + 1):
            mask = constraint.mask(state)
            expected = np.zeros(vocab.size, dtype=bool)
            for token_id in range(vocab.num_defined):
                if token_id in vocab.special_ids or not texts[token_id]:
                    continue
                expected[token_id] = compiled.fullmatch(prefix + texts[token_id], partial=True) is not None
            for eos in vocab.eos_ids:
                expected[eos] = compiled.fullmatch(prefix) is not None
            assert (mask == expected).all(), (sample, prefix, np.flatnonzero(mask != expected)[:5])
            if position == len(ids):
                break
            state = constraint.advance(state, ids[position])
            prefix += texts[ids[position]]
        assert constraint.accepts(ids)
    assert not constraint.mask(constraint.initial_state())[vocab.num_defined :].any()


def test_json_schema_over_bpe_accepts_real_tokenizations(tiny_vocab):
    vocab, encode = tiny_vocab
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
    constraint = grammar_constraint(vocab, GrammarSpec("json_schema", json.dumps(schema)))
    assert constraint.accepts(encode('{"n": 12}'))
    assert not constraint.accepts(encode('{"n": "12"}'))
    assert not constraint.accepts(encode('{"n": 12'))


# -- states -------------------------------------------------------------------------------------------
def test_states_are_revisited_after_their_matchers_are_evicted():
    tokens = ["(", ")", "((", "))", "()", "$"]
    vocab = Vocabulary.from_strings(tokens, "$")
    spec = lark('start: p+\np: "(" p* ")"')
    small = compile_grammar(spec, vocab).constraint(matcher_cache=2)
    states = reachable(small, vocab.size, 4)
    assert small.matchers_built > 2  # the LRU evicted and rebuilt
    for path, state in states[::-1]:  # back to states whose matchers are long gone
        state.mask = None  # forget the cached mask: recompute from a rebuilt matcher
        fresh = grammar_constraint(vocab, spec)
        s = fresh.initial_state()
        for token_id in path:
            s = fresh.advance(s, token_id)
        assert (small.mask(state) == fresh.mask(s)).all()
        assert small.advance(state, 5) == fresh.advance(s, 5)  # EOS verdict: END or None alike
    # a state is its path: the same object comes back for the same token
    root = small.initial_state()
    assert small.advance(root, 0) is small.advance(root, 0)
    assert hash(small.advance(root, 0)) == hash(small.advance(root, 0))


def test_vocabulary_edges_padding_special_several_eos_and_empty_tokens():
    data = [b"a", b"b", b"", b"", b"", b"ab"]  # 2: EOS, 3: second EOS, 4: ordinary but empty
    vocab = Vocabulary(data, eos_ids=[2, 3], size=9, special_ids=[])
    constraint = grammar_constraint(vocab, lark('start: "ab" | "a"'))
    root = constraint.initial_state()
    mask = constraint.mask(root)
    assert mask.tolist() == [True, False, False, False, True, True, False, False, False]
    assert constraint.advance(root, 4) is root  # no bytes: the text does not change
    after_a = constraint.advance(root, 0)
    assert constraint.mask(after_a).tolist() == [False, True, True, True, True, False, False, False, False]
    assert constraint.advance(after_a, 3) is END and constraint.advance(END, 0) is None
    assert constraint.advance(root, 7) is None and constraint.advance(root, 2) is None


# -- composition ---------------------------------------------------------------------------------------
def test_token_all_of_is_the_and_of_its_parts(tiny_vocab):
    vocab, encode = tiny_vocab
    spec = GrammarSpec("regex", r"[a-z_]+(\.[a-z_]+)*")
    combined = token_constraint(vocab, forced_prefix="lin", clean=True, grammar=spec)
    assert isinstance(combined, TokenAllOf) and len(combined.parts) == 2
    text_part, grammar_part = combined.parts
    assert isinstance(grammar_part, GrammarConstraint)
    state = combined.initial_state()
    for token_id in encode("linalg.norm"):
        mask = combined.mask(state)
        expected = text_part.mask(state[0]) & grammar_part.mask(state[1])
        assert (mask == expected).all()
        some = np.flatnonzero(expected)[:20].tolist() + np.flatnonzero(~expected)[:20].tolist()
        fresh = token_constraint(vocab, forced_prefix="lin", clean=True, grammar=spec)
        assert (fresh.allowed(state, some) == expected[some]).all()
        state = combined.advance(state, token_id)
        assert state is not None
    assert combined.advance(combined.initial_state(), encode(".")[0]) is None  # the grammar rejects it
    assert token_constraint(vocab, grammar=spec).source.startswith("grammar")


# -- decoders -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("decoder", decoder_names())
def test_every_decoder_runs_under_a_grammar_and_stays_inside_it(decoder):
    task = binary_task(5)
    constraint = grammar_constraint(task.vocab, lark(BINARY))
    request = DecodeRequest(prompt_ids=[], num_samples=20, seed=3, max_new_tokens=6)
    result = get_decoder(decoder).decode(task.language_model(), constraint, request)
    assert result.status == "ok" and result.samples
    valid = set(task.valid)
    for sample in result.samples:
        if decoder != "unconstrained":
            assert tuple(sample.token_ids) in valid
        assert sample.valid == (tuple(sample.token_ids) in valid)


def test_decoding_the_tiny_model_under_a_grammar():
    """The tiny model (random weights, byte-level BPE): GCD ends its samples (after the
    closing bracket only EOS is valid); AdapTrack's sample may be cut by the token limit,
    but every token it wrote was valid.  (Exactness is checked on tabular LMs, where
    P(s | c) can be enumerated.)"""
    from adaptrack_lsp.completion.lm.loading import load_model

    lm = load_model("tiny", device="cpu")
    spec = GrammarSpec("lark", 'start: NAME "(" [NAME ("," NAME)*] ")"\nNAME: /[a-z_]{1,6}/')
    checker = grammar_constraint(lm.vocab, spec)
    for decoder, samples, limit in [("constrained", 3, 12), ("adaptrack", 1, 6)]:
        request = DecodeRequest(prompt_ids=lm.encode("x = "), num_samples=samples, seed=1, max_new_tokens=limit, timeout_s=60)
        result = get_decoder(decoder).decode(lm, grammar_constraint(lm.vocab, spec), request)
        assert len(result.samples) == samples and all(s.valid for s in result.samples), decoder
        for sample in result.samples:
            state = checker.initial_state()
            for token_id in sample.token_ids:
                state = checker.advance(state, token_id)
                assert state is not None, sample.text
            if sample.complete:
                assert state is END and sample.text.endswith(")")
    assert all(s.complete for s in get_decoder("constrained").decode(lm, checker, DecodeRequest(prompt_ids=[], num_samples=2, seed=2, max_new_tokens=16)).samples)


# -- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ('start: "a" (', 1, 13, "Expected"),
        ('start: "a" item\nitem: foo', 2, 7, "unknown name"),
        ('start: "a"\nstart: "b"', 2, 8, "duplicate rule"),
        ("start: x\nx: /(?=a)b/", 2, 4, "look-around"),
    ],
)
def test_a_grammar_that_does_not_parse_names_line_and_column(text, line, column, words):
    vocab = binary_task(5).vocab
    with pytest.raises(GrammarError) as raised:
        grammar_constraint(vocab, lark(text, "g.lark"))
    assert (raised.value.line, raised.value.column) == (line, column)
    assert str(raised.value).startswith(f"g.lark:{line}:{column}:") and words in str(raised.value)


def test_bad_regex_and_json_schema_say_what_is_wrong():
    vocab = binary_task(5).vocab
    with pytest.raises(GrammarError, match="unclosed group"):
        grammar_constraint(vocab, GrammarSpec("regex", "(01"))
    with pytest.raises(GrammarError) as raised:
        grammar_constraint(vocab, GrammarSpec("json_schema", '{\n "type": ', "s.json"))
    assert raised.value.line == 2 and "not valid JSON" in str(raised.value)
    with pytest.raises(GrammarError, match="objec"):
        grammar_constraint(vocab, GrammarSpec("json_schema", '{"type": "objec"}'))
    with pytest.raises(GrammarError, match="suffix"):
        GrammarSpec.from_file(Path("grammar.txt"))


def test_an_empty_language_is_no_valid_completion_for_every_decoder():
    task = binary_task(5)
    spec = lark('start: "1" start')  # every derivation needs start again
    for decoder in decoder_names():
        if decoder == "unconstrained":
            continue
        result = get_decoder(decoder).decode(
            task.language_model(), grammar_constraint(task.vocab, spec), DecodeRequest(prompt_ids=[], num_samples=3, seed=1, max_new_tokens=6)
        )
        assert result.status == "no_valid_completion" and not result.samples, decoder
        assert "no valid completion" in result.message


def test_a_language_the_vocabulary_cannot_spell_is_no_valid_completion():
    task = binary_task(5)
    result = get_decoder("cars").decode(
        task.language_model(), grammar_constraint(task.vocab, lark('start: "x"')), DecodeRequest(prompt_ids=[], max_new_tokens=6)
    )
    assert result.status == "no_valid_completion"


def test_rules_that_never_finish_are_refused_by_name():
    vocab = binary_task(5).vocab
    with pytest.raises(GrammarError, match=r"'loop'.*never finish"):
        grammar_constraint(vocab, lark('start: "1" | "0" loop\nloop: "1" loop'))


def test_the_emptiness_check_on_recursive_and_repeated_rules():
    from adaptrack_lsp.constrainers.grammar import analyse_lark

    assert analyse_lark('start: a a a\na: "x" | "y" a').unproductive == []
    assert analyse_lark('start: a a\na: b b | "z"\nb: a a').unproductive == []
    empty = analyse_lark('start: a b\na: "x" | a a\nb: b "y"')
    assert not empty.nonempty and set(empty.unproductive) == {"start", "b"}
    assert not analyse_lark('start: %json {"type": "integer"}').analysed  # llguidance syntax: not read


def test_oversized_and_slow_grammars_are_refused():
    vocab = binary_task(5).vocab
    with pytest.raises(GrammarError, match="limit is"):
        grammar_constraint(vocab, lark('start: "0"' + " " * MAX_GRAMMAR_CHARS))
    many = "start: " + " | ".join(f'"{i:06b}"' for i in range(64)) + "\n" + "\n".join(f"r{i}: \"1\" r{i + 1}?" for i in range(4000))
    started = time.perf_counter()
    with pytest.raises(GrammarError, match="did not compile within"):
        compile_grammar(lark(many), vocab, GrammarLimits(compile_timeout_s=1e-4))
    assert time.perf_counter() - started < 5.0


def test_a_pathological_grammar_stops_with_a_limit_error_not_a_hang():
    """An exponentially ambiguous grammar: with a small item budget the mask computation
    stops with `GrammarLimitError` (naming the limit); with the default budget every mask
    along 40 tokens comes back within llguidance's fuel (well under a second)."""
    tokens = ["a", "$"]
    vocab = Vocabulary.from_strings(tokens, "$")
    spec = lark('start: x\nx: x x | x x x | "a"')
    tight = compile_grammar(spec, vocab, GrammarLimits(step_max_items=50)).constraint()
    state = tight.initial_state()
    with pytest.raises(GrammarLimitError, match="Too many items"):
        for _ in range(40):
            tight.mask(state)
            state = tight.advance(state, 0)
    loose = grammar_constraint(vocab, spec)
    state = loose.initial_state()
    worst = 0.0
    for _ in range(40):
        started = time.perf_counter()
        assert loose.mask(state)[0]
        worst = max(worst, time.perf_counter() - started)
        state = loose.advance(state, 0)
    assert worst < 1.0
    # a decode meeting the limit stops with the error (never an answer from a cut-short mask)
    task_lm = binary_task(5)
    pathological = compile_grammar(lark('start: x\nx: x x | x x x | "1" | "0"'), task_lm.vocab, GrammarLimits(step_max_items=50))
    started = time.perf_counter()
    with pytest.raises(GrammarLimitError):
        get_decoder("constrained").decode(
            task_lm.language_model(), pathological.constraint(), DecodeRequest(prompt_ids=[], num_samples=5, seed=1, max_new_tokens=40)
        )
    assert time.perf_counter() - started < 5.0


# -- the command line -------------------------------------------------------------------------------------
def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adaptrack_lsp", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_sample_with_a_grammar_compares_with_the_enumerated_p_s_given_c():
    done = run_cli(
        "sample", "--task", str(GRAMMARS / "slia.task.json"), "--grammar", str(GRAMMARS / "slia.lark"),
        "--decoder", "cars", "--n", "300", "--max-new-tokens", "12",
    )
    assert done.returncode == 0, done.stderr
    assert "P(s|c) by enumeration up to 12 tokens (28 valid sequences" in done.stdout
    assert "chi-square against P(s|c)" in done.stdout
    as_json = run_cli(
        "sample", "--task", str(GRAMMARS / "slia.task.json"), "--grammar", str(GRAMMARS / "slia.lark"), "--n", "50", "--json",
        "--max-new-tokens", "12",
    )
    data = json.loads(as_json.stdout)
    assert sum(data["counts"].values()) == 50 and data["grammar"].endswith("slia.lark") and data["length_cap"] == 12


def test_sample_with_a_broken_grammar_names_the_line_and_column(tmp_path):
    broken = tmp_path / "broken.lark"
    broken.write_text('start: item+\nitem: "a" | \n  | "b" (\n', encoding="utf-8")
    done = run_cli("sample", "--task", str(GRAMMARS / "slia.task.json"), "--grammar", str(broken))
    assert done.returncode == 2
    assert f"{broken}:3:10: Expected token" in done.stderr, done.stderr


def test_eval_dsl_with_a_grammar_writes_the_kl_table(tmp_path):
    done = run_cli(
        "eval", "dsl", "--data", str(GRAMMARS / "brackets.task.json"), "--grammar", str(GRAMMARS / "brackets.lark"),
        "--max-new-tokens", "11", "--samples", "60", "--decoders", "constrained,cars", "--out", str(tmp_path), "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert "brackets" in table and "CARS" in table and "enumerated up to 11 tokens" in table
    assert (tmp_path / "kl_curve.png").stat().st_size > 1000


# -- grammar tasks ------------------------------------------------------------------------------------------
def test_the_binary_grammar_enumerates_the_binary_task():
    from adaptrack_lsp.evaluation.grammar_tasks import bind_grammar

    bound = bind_grammar(binary_task(5), GrammarSpec.from_file(GRAMMARS / "binary.lark"), 6)
    assert sorted(bound.valid) == sorted(binary_task(5).valid)
    assert bound.exact_distribution() == pytest.approx(binary_task(5).exact_distribution())
    gcd = bound.gcd_distribution()
    assert gcd.probabilities == pytest.approx(binary_task(5).gcd_distribution().probabilities) and gcd.dead_end == 0


def test_task_files_may_be_ngram_lms_and_leave_out_valid_only_under_a_grammar():
    from adaptrack_lsp.evaluation.tasks import TaskError, task_from_dict

    data = {"vocab": ["a", "b", "$"], "eos": "$", "context": 1, "default": {"$": 1.0},
            "next": [{"prefix": [], "probs": {"a": 1.0}}, {"prefix": ["a"], "probs": {"b": 0.5, "$": 0.5}}]}
    task = task_from_dict(data, require_valid=False)
    assert task.probs([0, 0, 0]).tolist() == [0.0, 0.5, 0.5]  # the last token decides
    assert task.probs([1]).tolist() == [0.0, 0.0, 1.0]
    assert task.language_model().next_logprobs([0])[1] == pytest.approx(np.log(0.5))
    with pytest.raises(TaskError, match="valid: missing"):
        task_from_dict(data)
    with pytest.raises(TaskError, match=r"next\[0\].prefix: 2 tokens, longer than the context \(1\)"):
        task_from_dict({**data, "next": [{"prefix": ["a", "a"], "probs": {"b": 1.0}}]}, require_valid=False)


def test_the_committed_task_lms_are_what_the_experiments_define():
    import importlib.util

    spec = importlib.util.spec_from_file_location("grammar_experiments", ROOT / "benchmarks" / "grammar_experiments.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in module.EXPERIMENTS:
        committed = json.loads((GRAMMARS / f"{name}.task.json").read_text(encoding="utf-8"))
        assert committed == json.loads(json.dumps(module.task_document(name))), name


def test_the_grammar_experiments_benchmark_smoke_run():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "grammar_experiments.py"), "--smoke"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    last = dict(pair.split("=") for pair in done.stdout.strip().splitlines()[-1].split())
    for task in ("binary", "brackets", "slia"):
        for decoder in ("constrained", "asap", "adaptrack", "exact", "cars"):
            assert f"kl_{task}_{decoder}" in last
    for task in ("json", "xml"):
        for sampler in ("rs", "ars", "rsft", "cars", "exact"):
            assert float(last[f"lm_calls_per_10_valid_{task}_{sampler}"]) > 0
        assert float(last[f"gcd_kl_{task}"]) > 0.1  # GCD is visibly distorted on both
    assert "| Method | binary | brackets | slia | average |" in done.stdout


def test_llguidance_is_imported_only_when_a_grammar_is_compiled():
    code = (
        "import sys\n"
        "import adaptrack_lsp.cli, adaptrack_lsp.commands.sample, adaptrack_lsp.commands.eval\n"
        "import adaptrack_lsp.constrainers.environment, adaptrack_lsp.constrainers.grammar, adaptrack_lsp.constrainers.compose\n"
        "import adaptrack_lsp.evaluation.grammar_tasks, adaptrack_lsp.evaluation.dsl\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('llguidance', 'lark')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_eval_dsl_with_a_broken_grammar_exits_2_naming_the_place(tmp_path):
    broken = tmp_path / "broken.lark"
    broken.write_text('start: "a"\nstart: "b"\n', encoding="utf-8")
    done = run_cli("eval", "dsl", "--grammar", str(broken), "--out", str(tmp_path / "out"), "--no-progress")
    assert done.returncode == 2
    assert f"{broken}:2:8: duplicate rule" in done.stderr, done.stderr
