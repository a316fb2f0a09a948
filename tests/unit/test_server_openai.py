"""The server backend's OpenAI protocol (`/v1/completions` with token-id prompts,
`logprobs`, `logit_bias`: what vLLM and SGLang speak) on real servers on 127.0.0.1:

- llama-server's OpenAI endpoint (`dialect="openai"`; by default the backend uses
  llama-server's own endpoint instead).  This endpoint leaves out the log-probabilities
  of a token after which the text ends inside a UTF-8 character, and reports the next
  token with the bytes of both: the backend must never put a distribution at a shifted
  node, must end a continuation computed ahead before such a gap, and must resolve a tail
  draw that lands on such a token exactly.
- vLLM's CPU build (`.ci/install-vllm`; skipped, naming it, where not installed): every
  position reported, ids as ``token_id:N``, the sampled token added to each top list.

On both: the connect checks pass; the ids the server ends generation at are found;
sequences ended by end-of-generation tokens in the tail of a flat model are exact against
P(s | c) computed by llama.cpp itself (`end_of_generation_support`); lookahead fills the
engine's own path in one request
(`server_calls`); top-K is the head of the engine's full distribution; exclusion draws
are exact; and the exact samplers are exact per request (`exact`, `cars`, `ars`, one
sample per request on a fresh tree) on an `--allowed` lines constraint whose texts are
ASCII, against P(s | c) enumerated from the same engine's full distributions.

The lines: nine texts of two short ASCII tokens from the engine's own ranking (first
tokens of ranks 0, 2 and 6, in and beyond the top-5 list; second tokens of high rank
under one, of rank 100 to 400 under another, so that greedy masking (GCD) is far from
P(s | c)), each ended where its text is complete (a stop rule, as a line ends ghost
text).  Every tokenization of a text is its own sequence (34 on llama-server), all
enumerated.  Tolerance as in `test_exactness.py`: chi-square, pass at p > 1e-4, wrong
distributions rejected at p < 1e-9.  Fixed seeds.
"""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest
from end_of_generation_support import assert_exact_with_end_tokens_in_the_tail
from llama_server_support import llama_server  # noqa: F401
from test_exactness import ALPHA, REJECT_BELOW
from vllm_server_support import vllm_server  # noqa: F401

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.completion.lm.server import ServerLanguageModel, load_from_settings
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.allowed_lines import allowed_lines_constraint
from adaptrack_lsp.constrainers.base import Unconstrained
from adaptrack_lsp.evaluation.tasks import chi_square

SERVERS = ["llama-server", "vllm"]
PROMPT = "import numpy as np\n\ndef scale(values, factor):\n    return np."
#: a prompt whose greedy path (tiny model) starts with a byte token inside a character
INSIDE_A_CHARACTER = "x" * 50
#: a prompt whose greedy path takes such a token at position 9 (PROMPT itself)
GAP_LATER = PROMPT
PLAIN = "for index, value in enumerate(values):\n    print("
SAMPLES = 400
ARS_SAMPLES = 200
FIRST_RANKS = (0, 2, 6)
SECOND_RANKS = ((0, 1, 2), (100, 200, 400), (5, 6, 10))
#: the longest token of a line (bytes): short tokens keep the tokenizations few
TOKEN_BYTES = 2


def connect(url: str, dialect: str = "openai", **changes) -> ServerLanguageModel:
    settings = Settings(model="tiny", backend="server", endpoint=url, server_timeout_ms=30_000).replace(**changes)
    lm = load_from_settings(settings, dialect=dialect)
    assert lm.connected, lm.connect_error
    return lm


def greedy(lm, prompt: str, max_new_tokens: int):
    request = DecodeRequest(prompt_ids=lm.encode(prompt), temperature=0.0, max_new_tokens=max_new_tokens, timeout_s=120)
    return get_decoder("adaptrack").decode(lm, Unconstrained(lm.vocab), request)


def eligible_argmax(lm, full: np.ndarray) -> int:
    """The argmax the backend's continuation takes: special and padding ids (EOS
    excepted) are never generated."""
    ineligible = set(lm._never_generated())
    return int(max((i for i in range(full.size) if i not in ineligible), key=lambda i: full[i]))


@pytest.fixture(scope="module", params=SERVERS)
def url(request) -> str:
    return request.getfixturevalue("llama_server" if request.param == "llama-server" else "vllm_server").url


@pytest.fixture(scope="module")
def lm(url) -> ServerLanguageModel:
    return connect(url)


# -- connect ---------------------------------------------------------------------------------------------
def test_the_connect_checks_pass_on_the_openai_protocol(lm, url):
    assert lm.dialect == "openai" and lm.model_name == "tiny" and lm.url == url
    assert lm.can_exclude and not lm.warning and lm.max_context == 2048
    assert lm.software in ("llamacpp", "vllm")
    # full distributions: llama-server reports its vocabulary; vLLM lists one when started with --max-logprobs -1
    assert lm.can_enumerate and lm._full_size == lm.vocab.size == 6016
    assert lm.server_vocab_size == (6016 if lm.software == "llamacpp" else None)


def test_top_k_is_the_head_of_the_full_distribution(lm):
    lm.set_prompt(lm.encode(PLAIN), max_new_tokens=4)
    top = lm.next_top([])
    full = lm.next_logprobs([])
    order = np.argsort(-full, kind="stable")[: top.ids.size]
    assert top.ids.size == 20 and set(top.ids.tolist()) == set(order.tolist())
    assert np.allclose(np.sort(full[order]), np.sort(top.logprobs), atol=1e-5)
    assert math.isclose(top.tail_mass, 1.0 - float(np.exp(full[top.ids]).sum()), abs_tol=1e-5)


# -- lookahead ---------------------------------------------------------------------------------------------
def test_one_request_fills_the_engines_own_path(url):
    """Greedy decoding along the model's own path (no token inside a character on it)
    costs one server call for 16 tokens and gives the argmax path of the full
    distributions; every node it filled holds that node's distribution."""
    lm = connect(url)
    result = greedy(lm, PLAIN, 16)
    assert result.counters.server_calls == 1 and result.counters.lm_calls == 16
    path: list[int] = []
    for _ in range(16):
        full = lm.next_logprobs(path)
        top = lm._cache[tuple(path)]
        assert np.allclose(full[top.ids], top.logprobs, atol=1e-4)
        path.append(eligible_argmax(lm, full))
    assert result.samples[0].token_ids == path


def test_vllm_reports_every_position(url):
    """vLLM lists the log-probabilities of a token inside a character: the greedy path
    of INSIDE_A_CHARACTER (a byte token first) is one request, nothing is left out."""
    lm = connect(url)
    if lm.software != "vllm":
        pytest.skip("vLLM only: llama-server leaves such positions out (the tests below)")
    result = greedy(lm, INSIDE_A_CHARACTER, 16)
    assert result.counters.server_calls == 1 and not lm._leaves_out
    assert result.samples[0].token_ids[0] in lm._splits_characters()


# -- positions left out (llama-server's OpenAI endpoint) ------------------------------------------------------
def _raw_completion(url: str, lm, prompt_ids, max_tokens: int) -> dict:
    body = lm._body(prompt_ids, max_tokens=max_tokens, logprobs=5, greedy=True, seed=0)
    with httpx.Client(trust_env=False, timeout=30) as client:
        return client.post(f"{url}/v1/completions", json=body).json()


def _assert_every_cached_node_is_its_own(lm, witness) -> int:
    """Every distribution `lm` cached is the one `witness` (llama-server's own endpoint,
    which returns every token id) computes at that node; returns how many were checked."""
    for path, top in lm._cache.items():
        full = witness.next_logprobs(list(path))
        order = np.argsort(-full, kind="stable")[: top.ids.size]
        assert set(top.ids.tolist()) == set(order.tolist()), f"the distribution cached at {path} is another node's"
        assert np.allclose(full[top.ids], top.logprobs, atol=1e-4)
    return len(lm._cache)


def test_a_position_left_out_puts_no_distribution_at_a_wrong_node(llama_server):  # noqa: F811
    """INSIDE_A_CHARACTER: the greedy path starts with a byte token that ends inside a
    character.  The server's reply has no entry for it: its first entry is the next
    token's, carrying the bytes of both, with the distribution AFTER the byte token.
    Taken as the first position it would put that distribution at the root; the backend
    sees the gap, caches nothing from that reply, asks again avoiding such tokens (one
    extra request, once per connection), and every node it cached is right."""
    lm = connect(llama_server.url)
    witness = connect(llama_server.url, dialect="auto")
    assert witness.dialect == "llamacpp"
    ids = lm.encode(INSIDE_A_CHARACTER)
    witness.set_prompt(ids, 16)
    root = witness.next_logprobs([])
    byte_token = eligible_argmax(witness, root)
    assert byte_token in lm._splits_characters()
    raw = _raw_completion(llama_server.url, lm, ids, 4)
    first = raw["choices"][0]["logprobs"]["content"][0]
    assert raw["usage"]["completion_tokens"] == 4 and len(raw["choices"][0]["logprobs"]["content"]) == 3
    assert bytes(first["bytes"]) == lm.vocab.token_bytes[byte_token] + lm.vocab.token_bytes[first["id"]]
    naive = [t["id"] for t in first["top_logprobs"]]
    assert set(naive) != set(np.argsort(-root, kind="stable")[:5].tolist())  # the naive reading is wrong

    lm.set_prompt(ids, 16)
    calls = lm.server_calls
    top = lm.next_top([])
    assert lm.server_calls - calls == 2 and lm._leaves_out
    assert set(top.ids.tolist()) == set(np.argsort(-root, kind="stable")[:20].tolist())
    result = greedy(lm, INSIDE_A_CHARACTER, 16)
    expected = greedy(witness, INSIDE_A_CHARACTER, 16)
    assert result.samples[0].token_ids == expected.samples[0].token_ids and result.samples[0].token_ids[0] == byte_token
    assert _assert_every_cached_node_is_its_own(lm, witness) >= 16


def test_a_continuation_ends_before_the_first_position_left_out(llama_server):  # noqa: F811
    """GAP_LATER: the greedy path takes a byte token inside a character at position 9.
    The first request (the server not yet known to leave positions out) fills the nine
    nodes before it and nothing after; past it, the continuation that avoids such tokens
    leaves the path at once, so the next asks for two positions and the last for the
    rest (three requests); the decode is the engine's argmax path."""
    lm = connect(llama_server.url)
    witness = connect(llama_server.url, dialect="auto")
    expected = greedy(witness, GAP_LATER, 16).samples[0].token_ids
    assert [i for i, t in enumerate(expected) if t in set(lm._splits_characters())][:1] == [9]
    lm.set_prompt(lm.encode(GAP_LATER), 16)
    calls = lm.server_calls
    lm.next_top([])
    assert lm.server_calls - calls == 1 and lm._leaves_out
    assert sorted(lm._cache, key=len) == [tuple(expected[:i]) for i in range(9)]
    result = greedy(lm, GAP_LATER, 16)
    assert result.samples[0].token_ids == expected and result.counters.server_calls == 3
    _assert_every_cached_node_is_its_own(lm, witness)


# -- exclusion draws ---------------------------------------------------------------------------------------
def _draws(lm, kept: list[int], full: np.ndarray, count: int, seed: int) -> dict:
    excluded = sorted(set(range(lm.vocab.size)) - set(kept))
    found: dict = {}
    for index in range(count):
        token, logprob = lm.draw_excluding([], excluded, greedy=False, seed=seed + index)
        assert token in kept and abs(logprob - full[token]) < 1e-4  # the raw log-probability
        found[(token,)] = found.get((token,), 0) + 1
    return found


def test_an_exclusion_draw_is_an_exact_draw_from_the_rest(lm):
    """OpenAI `logit_bias` (id -> -100) excludes every id but five: 200 seeded draws
    follow P restricted to them (chi-square, p > 1e-4) and come back with their raw
    log-probability; the greedy draw is their most probable; and the test has power
    (the draws are far from uniform over the five)."""
    lm.set_prompt(lm.encode(PLAIN), max_new_tokens=1)
    full = lm.next_logprobs([])
    order = np.argsort(-full, kind="stable")
    kept = [int(t) for t in order[20:40] if lm.vocab.token_bytes[int(t)].isascii()][:5]
    found = _draws(lm, kept, full, 200, 1000)
    weights = np.exp(full[kept])
    expected = {(t,): float(w / weights.sum()) for t, w in zip(kept, weights, strict=True)}
    assert chi_square(found, expected).p_value > ALPHA
    token, _ = lm.draw_excluding([], sorted(set(range(lm.vocab.size)) - set(kept)), greedy=True, seed=0)
    assert token == kept[0]


def test_a_drawn_token_whose_position_is_left_out_is_still_exact(llama_server):  # noqa: F811
    """Only three byte tokens that end inside a character and two ordinary tokens are
    allowed.  llama-server leaves the position of a drawn byte token out, so its id is
    unknown; the backend then draws among the allowed byte tokens from the full
    distribution (the server's draw told only that one of them was drawn).  200 draws
    follow P restricted to the five (chi-square), each with its raw log-probability."""
    lm = connect(llama_server.url)
    lm.set_prompt(lm.encode(INSIDE_A_CHARACTER), max_new_tokens=1)
    full = lm.next_logprobs([])
    splitting = sorted(lm._splits_characters(), key=lambda t: -full[t])[:3]
    ordinary = [int(t) for t in np.argsort(-full, kind="stable") if t < lm.vocab.num_defined and lm.vocab.token_bytes[t].isascii()]
    ordinary = [t for t in ordinary if lm.vocab.token_bytes[t]][:2]
    kept = splitting + ordinary
    calls = lm.server_calls
    found = _draws(lm, kept, full, 200, 7000)
    weights = np.exp(full[kept])
    expected = {(t,): float(w / weights.sum()) for t, w in zip(kept, weights, strict=True)}
    assert chi_square(found, expected).p_value > ALPHA
    assert sum(found.get((t,), 0) for t in splitting) > 20 and lm._leaves_out
    assert lm.server_calls - calls == 200  # the full distribution was at hand: one request per draw


# -- exactness per request ---------------------------------------------------------------------------------
class Problem:
    """The allowed lines, P(s | c) and GCD's distribution over every tokenization,
    enumerated from full distributions of `reference` (the same server; the model
    under test starts with empty caches, so its tails are drawn)."""

    def __init__(self, lm: ServerLanguageModel, reference: ServerLanguageModel):
        self.lm = lm
        vocab = lm.vocab
        self.prompt = lm.encode(PROMPT)
        reference.set_prompt(self.prompt, max_new_tokens=8)

        def short_ascii(token: int) -> bool:
            data = vocab.token_bytes[token] if token < vocab.num_defined else b""
            return not vocab.is_special(token) and 0 < len(data) <= TOKEN_BYTES and all(32 <= c < 127 for c in data) and bool(data.strip())

        def ranked(path):
            full = reference.next_logprobs(path)
            return [int(i) for i in np.argsort(-full, kind="stable") if short_ascii(int(i))]

        firsts = [ranked([])[r] for r in FIRST_RANKS]
        self.lines = [vocab.text(a) + vocab.text(ranked([a])[r]) for a, ranks in zip(firsts, SECOND_RANKS, strict=True) for r in ranks]
        texts = set(self.lines)
        assert len(texts) == 9 and all(t.isascii() for t in texts)
        assert not any(a != b and b.startswith(a) for a in texts for b in texts)  # a line ends where its text is complete
        self.texts = texts
        self.constraint = allowed_lines_constraint(vocab, self.lines, source="server exactness (OpenAI protocol)")
        candidates = [t for t in range(vocab.num_defined) if not vocab.is_special(t) and vocab.token_bytes[t] and vocab.token_bytes[t].isascii()]
        logp: dict[tuple[int, ...], float] = {}
        gcd_logp: dict[tuple[int, ...], float] = {}
        self.internal_nodes = 0

        def walk(path: list[int], text: str, value: float, gcd_value: float) -> None:
            self.internal_nodes += 1
            full = reference.next_logprobs(path)
            allowed = [u for u in candidates if any(line.startswith(text + vocab.text(u)) for line in texts)]
            mass = math.fsum(math.exp(full[u]) for u in allowed)
            for u in allowed:
                grown = text + vocab.text(u)
                if grown in texts:
                    logp[tuple(path + [u])] = value + full[u]
                    gcd_logp[tuple(path + [u])] = gcd_value + full[u] - math.log(mass)
                else:
                    walk(path + [u], grown, value + full[u], gcd_value + full[u] - math.log(mass))

        walk([], "", 0.0, 0.0)
        total = math.fsum(math.exp(v) for v in logp.values())
        self.exact = {s: math.exp(v) / total for s, v in logp.items()}
        self.gcd = {s: math.exp(v) for s, v in gcd_logp.items()}
        self.max_tokens = max(len(s) for s in self.exact)

    def stop(self, text: str, checked: int) -> bool:
        return text in self.texts

    def decode(self, decoder: str, num_samples: int, seed: int, **options):
        request = DecodeRequest(
            prompt_ids=self.prompt, num_samples=num_samples, seed=seed, max_new_tokens=self.max_tokens, stop=self.stop, timeout_s=900, options=options
        )
        return get_decoder(decoder).decode(self.lm, self.constraint, request)


@pytest.fixture(scope="module")
def problem(url) -> Problem:
    return Problem(connect(url, server_top_logprobs=5), connect(url))


def counts(problem: Problem, result) -> dict:
    assert result.status == "ok", (result.status, result.message)
    found: dict = {}
    for sample in result.samples:
        assert sample.complete and sample.valid and sample.text in problem.texts
        found[tuple(sample.token_ids)] = found.get(tuple(sample.token_ids), 0) + 1
    return found


def test_the_problem_needs_the_tail_and_separates_gcd_from_p_s_given_c(problem):
    reference = connect(problem.lm.url, server_top_logprobs=5)
    reference.set_prompt(problem.prompt, 8)
    top = reference.next_top([])
    firsts = {s[0] for s in problem.exact if len(s) == 2 and problem.exact[s] > 0.001}
    assert firsts - set(top.ids.tolist())  # a first token of some line lies in the tail of the top-5 list
    assert len(problem.exact) > 9  # other tokenizations of the lines count too
    assert 0.5 * sum(abs(problem.exact[s] - problem.gcd[s]) for s in problem.exact) > 0.15


@pytest.mark.parametrize("decoder, samples", [("exact", SAMPLES), ("cars", SAMPLES), pytest.param("ars", ARS_SAMPLES, marks=pytest.mark.slow)])
def test_exact_samplers_are_exact_per_request_over_the_openai_protocol(problem, decoder, samples):
    """One sample per request, a fresh prefix tree each (as ghost-text requests).  `ars`
    learns one invalid token per restart, so on a fresh tree over this random model
    (the lines hold ~1% of the root's mass) a sample takes a hundred restarts or more:
    fewer samples, still enough to reject GCD's distribution.  On llama-server only: its
    calls to the backend are those of `exact` and `cars`, and vLLM's engine loop slows it
    a further 2x on this 2-core machine (benchmarks/server_openai_exactness.py --server
    vllm runs it there)."""
    if decoder == "ars" and problem.lm.software == "vllm":
        pytest.skip("ars per request over vLLM: benchmarks/server_openai_exactness.py --server vllm (minutes)")
    result = problem.decode(decoder, samples, seed=41, share_estimates=False)
    found = counts(problem, result)
    assert sum(found.values()) == samples
    test = chi_square(found, problem.exact)
    assert test.p_value > ALPHA, f"{decoder}: chi2={test.statistic:.1f}, p={test.p_value:.2g}"
    assert chi_square(found, problem.gcd).p_value < REJECT_BELOW  # power: not GCD's distribution


def test_greedy_masking_follows_its_own_distribution_and_fails_p_s_given_c(problem):
    found = counts(problem, problem.decode("constrained", 1000, seed=5, share_estimates=False))
    assert chi_square(found, problem.gcd).p_value > ALPHA
    assert chi_square(found, problem.exact).p_value < REJECT_BELOW


def test_sequences_ended_by_end_of_generation_tokens_in_the_tail_are_exact(url):
    """The end tokens lie in the tail (top-20 lists of a flat model), no stop rule: every
    sample ends with an end-of-generation token (vLLM ends generation at fewer of them,
    <|endoftext|> and <|file_sep|>; sequences still end at all of llama.cpp's)."""
    assert_exact_with_end_tokens_in_the_tail(connect(url))


def test_the_server_says_where_it_ends_generation(url):
    """A tokenizer that names one end: the others where the server ends generation are
    found at connect (each forced once): llama.cpp's end-of-generation ids on
    llama-server, the model's generation config's on vLLM."""
    from adaptrack_lsp.vocab import Vocabulary

    lm = connect(url)
    named = lm.vocab
    lm.vocab = Vocabulary(named.token_bytes, [min(named.eos_ids)], named.size, named.special_ids)
    lm.connect()
    found = sorted(lm.vocab.eos_ids)
    names = [lm.tokenizer.convert_ids_to_tokens(t) for t in found]
    if lm.software == "llamacpp":
        assert names == ["<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
    else:
        assert names == ["<|endoftext|>", "<|file_sep|>"]


# -- servers that give less ----------------------------------------------------------------------------------
def test_a_server_without_token_bytes_never_misplaces_a_distribution(llama_server):  # noqa: F811
    """A reply whose entries carry ids only: a position left out cannot be placed, so
    nothing of such a reply is cached; decoding still follows the engine's argmax path
    and every cached node is right."""
    from llama_server_support import fault_proxy

    witness = connect(llama_server.url, dialect="auto")
    with fault_proxy(llama_server.url) as proxy:
        proxy.fault("no_bytes")
        lm = connect(proxy.url)
        for prompt in (INSIDE_A_CHARACTER, GAP_LATER):
            result = greedy(lm, prompt, 16)
            assert result.samples[0].token_ids == greedy(witness, prompt, 16).samples[0].token_ids
            witness.set_prompt(lm.encode(prompt), 16)
            _assert_every_cached_node_is_its_own(lm, witness)


def test_a_server_whose_top_lists_follow_logit_bias_is_refused(llama_server):  # noqa: F811
    """Continuations computed ahead ban ids through logit_bias, so the lists must stay
    raw under it; a server that drops banned ids from them is refused at connect."""
    from llama_server_support import fault_proxy

    with fault_proxy(llama_server.url) as proxy:
        proxy.fault("biased_lists")
        lm = load_from_settings(Settings(model="tiny", backend="server", endpoint=proxy.url), dialect="openai")
        assert not lm.connected and "after applying logit_bias" in lm.connect_error and "raw_logprobs" in lm.connect_error
        proxy.fault("none")
        assert greedy(lm, PLAIN, 4).samples and lm.connected
