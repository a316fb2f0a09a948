"""The ``server`` backend: a model behind an OpenAI-compatible `/v1/completions` endpoint.

Works with servers that take token-id prompts and return per-token top-K
log-probabilities with token ids: llama.cpp's ``llama-server``, vLLM (with
``return_tokens_as_token_ids``), SGLang, Ollama from 0.12.11.  A node's distribution is
the top-K log-probabilities plus the tail's mass (`TopK`); the prefix tree draws from
a tail by asking for ONE token with the known ids excluded (``logit_bias``), which is an
exact draw from the tail, so the exact samplers stay exact against the server's own
distribution (docs/engines.md, "Exactness on servers").

Two protocols (`ServerOptions.dialect`): llama-server is used through its own
``/completion`` endpoint, which returns every generated token id; every other server
through the OpenAI ``/v1/completions`` (``dialect="openai"`` uses it on llama-server
too: that is how the tests run the OpenAI protocol against a real server).  Tested
against llama-server (both protocols) and vLLM's CPU build; SGLang and Ollama are not.

What this module owns:

- **the connection and its checks** (`connect`, on first use and again after any
  failure): ``/v1/models`` answers like an OpenAI-compatible server; the model name is
  one the server serves; the server's vocabulary is not smaller than the tokenizer's;
  the tokenizer matches the server's (``/tokenize`` where offered, else the bytes of the
  ids in a reply); log-probabilities come back, with token ids, for as many tokens as
  asked; they are the raw distribution (the same at two temperatures: no sampler or
  temperature applied, and unchanged by ``logit_bias``); ``logit_bias`` excludes a token
  (else the model is the top-K truncation and `warning` says so) and whether the
  excluded draw's log-probability is raw or renormalised; whether a full distribution
  can be asked for (llama-server: its vocabulary size; vLLM: started with
  ``--max-logprobs -1``, one probe); and at which special tokens the server ends
  generation (each one the tokenizer does not name an end is forced once, when there
  are few): those end a sequence here too, so a sequence ends where the engine ends it
  and P(s | c) is the one the same model has in process (llama.cpp ends at every
  `llama_vocab_is_eog` token, e.g. Qwen's ``<|fim_pad|>``).
- **requests**: every sampler neutral on every request (llama-server's defaults are
  top_k 40, top_p 0.95, min_p 0.05, ...), token-id prompts, the API key from the
  environment variable the settings name (never logged), TLS verified against the
  system's certificate authorities, no redirects followed and no proxy from the
  environment (nothing goes to a host the user did not configure), a cap on the reply's
  size, a timeout that never outlasts the decode's budget.
- **lookahead**: one request returns a continuation of up to `lookahead` tokens with the
  top-K at every position, so every node along the engine's own path (its argmax path
  for greedy decoding, a seeded sample otherwise) is filled by that one request; a new
  request is needed only where the decoder leaves that path.  `server_calls` counts
  requests.  Past the first request of a prompt the length follows use, as TCP's window
  does: the next request asks for twice the part of the last reply the decoder used
  (every position computed ahead costs one token of the server's time).
- **positions left out**: llama-server gives no log-probabilities for a token after
  which the text ends inside a UTF-8 character.  On its own endpoint the token ids still
  come back and the positions are aligned by replaying its rule.  An OpenAI reply gives
  ids and bytes per entry: an entry whose bytes are more than its token's carries the
  bytes of positions left out before it, so a reply is used only up to the first such
  gap (`Reply`) and no distribution is ever cached at a shifted node; once a server has
  shown it leaves positions out, continuations computed ahead avoid such tokens.  A tail
  draw whose token was left out (its id unknown) is completed from the full
  distribution: the server's draw fell among the tail's tokens that end inside a
  character, and one of them drawn from P restricted to them is an exact draw.

Every failure is an `EngineUnavailable` whose message names the fix; the language
server shows it as status ``degraded`` and tries again on the next request.
"""

from __future__ import annotations

import json
import logging
import math
import os
import ssl
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adaptrack_lsp.completion.decoding import BudgetExceeded
from adaptrack_lsp.completion.lm.base import EngineUnavailable, ModelError, PartialLanguageModel, PromptInfo, TopK
from adaptrack_lsp.completion.tokenizer_bytes import encode_ids
from adaptrack_lsp.vocab import Vocabulary

log = logging.getLogger(__name__)

#: largest reply read from the server (a full distribution of a 152k vocabulary is ~15 MB)
MAX_RESPONSE_BYTES = 64 * 2**20
#: tokens a tail draw computes ahead (a drawn token is often invalid: its path is rarely followed)
DRAW_LOOKAHEAD = 4
#: node distributions kept for the current prompt (beyond this the cache starts again)
MAX_CACHED_NODES = 50_000
#: full distributions kept for the current prompt
MAX_FULL_CACHED = 64
#: texts whose tokenization is compared with the server's at connect
PROBE_TEXTS = (
    "import numpy as np\nx = np.linalg.norm(a, ord=2)  # norm\n",
    "\tdef __init__(self, *args, **kwargs):\r\n        return {'é': \"日本\", 3.5e-3: None}\n",
)
#: the prompt of the connect probes
PROBE_PROMPT = "def add(a, b):\n    return a"
#: special tokens (not named an end by the tokenizer) forced once at connect to learn
#: whether the server ends generation at them; with more, none is probed (logged)
MAX_END_PROBES = 32
#: log-probabilities that differ by more than this between two temperatures are not raw
RAW_TOLERANCE = 2e-3
#: the most times an exclusion draw is repeated when the server returns an excluded id
#: (a finite logit_bias leaks with probability ~exp(-100); a repeat is an exact rejection)
LEAK_RETRIES = 3
#: sampler settings that make llama-server, vLLM and SGLang sample from the raw
#: distribution (at the request's temperature); unknown keys are ignored by each server
NEUTRAL_SAMPLERS: dict[str, Any] = {
    "top_k": -1,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
    "top_n_sigma": -1.0,
    "dynatemp_range": 0.0,
    "n": 1,
    "stream": False,
    "echo": False,
}
#: how requests are made: "auto" (llama-server through its own `/completion` endpoint,
#: found by `owned_by: "llamacpp"`; any other server through `/v1/completions`) or
#: "openai" (`/v1/completions` whatever the server)
DIALECTS = ("auto", "openai")
#: llama-server only: the sampler chain is temperature and the final draw, nothing else
LLAMACPP_EXTRA: dict[str, Any] = {"samplers": ["temperature"], "cache_prompt": True}
#: vLLM (and servers that share its protocol): token ids in the log-probabilities
VLLM_EXTRA: dict[str, Any] = {"return_tokens_as_token_ids": True, "skip_special_tokens": False}


@dataclass(frozen=True)
class ServerOptions:
    """How to reach and use the server (from `Settings`)."""

    endpoint: str
    #: the model name sent with each request; "" = the only model the server serves
    model: str = ""
    #: the environment variable holding the API key ("" or unset: no key)
    api_key_env: str = "ADAPTRACK_API_KEY"
    #: top log-probabilities per position
    top_logprobs: int = 20
    #: tokens one request computes ahead along the engine's path
    lookahead: int = 32
    #: the longest one request may take (the decode's budget also bounds it)
    timeout_s: float = 10.0
    max_response_bytes: int = MAX_RESPONSE_BYTES
    #: one of `DIALECTS`; "openai" runs the generic protocol on llama-server too (tests)
    dialect: str = "auto"


def base_url(endpoint: str) -> str:
    """The server's root URL from an `endpoint` setting (``http://host:8080`` or
    ``.../v1``); raises EngineUnavailable for anything that is not http(s)."""
    from urllib.parse import urlsplit

    text = (endpoint or "").strip()
    if not text:
        raise EngineUnavailable('the server backend needs an endpoint: set `endpoint` (e.g. "http://127.0.0.1:8080")')
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineUnavailable(f"endpoint {text!r} is not an http(s) URL: set `endpoint` to e.g. http://127.0.0.1:8080")
    if parts.username or parts.password:
        raise EngineUnavailable("the endpoint must not hold credentials: put the API key in the environment variable `apiKeyEnv` names")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass
class Position:
    """One generated position of a reply: the token, its log-probability, the top list
    (None: the server left this position out; llama-server's own endpoint only)."""

    token: int
    logprob: float
    top: list[tuple[int, float]] | None
    top_bytes: dict[int, bytes]


@dataclass
class Reply:
    """The generated positions of one completion reply, in order from the first.

    `left_out`: the server generated more tokens than `positions` holds and reported no
    log-probabilities for some of them (llama-server's OpenAI endpoint leaves out a token
    after which the text ends inside a UTF-8 character, and reports the next one with the
    bytes of both).  `positions` then stops before the first position left out: past it
    the reply's tokens are unknown, so nothing after it is matched to a node."""

    positions: list[Position]
    left_out: bool = False


#: llama-server's own completion endpoint: it returns every generated token id (its
#: OpenAI endpoint drops the log-probabilities of a token that ends inside a UTF-8
#: character, and with them the alignment of positions to tokens)
NATIVE_COMPLETION = "/completion"


def _utf8_complete_length(data: bytes) -> int:
    """llama.cpp's `validate_utf8`: the length of `data` without a trailing UTF-8
    character cut short (llama-server holds such a token back)."""
    size = len(data)
    for back in range(1, min(4, size) + 1):
        byte = data[size - back]
        if (byte & 0xE0) == 0xC0 and back < 2:
            return size - back
        if (byte & 0xF0) == 0xE0 and back < 3:
            return size - back
        if (byte & 0xF8) == 0xF0 and back < 4:
            return size - back
    return size


def _all_incomplete(lm, tokens) -> bool:
    """Whether every generated token left the text inside a character (then a reply
    rightly has no log-probabilities); False for no tokens."""
    if not tokens:
        return False
    text = b""
    for token in tokens:
        text += lm._piece(int(token))
        if _utf8_complete_length(text) == len(text):
            return False
    return True


class ServerLanguageModel(PartialLanguageModel):
    """A model served over HTTP, seen as top-K + tail distributions (see the module docstring)."""

    def __init__(self, options: ServerOptions, tokenizer, vocab: Vocabulary, name: str = "server", tokenizer_name: str = ""):
        self.options = options
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.name = name
        self.tokenizer_name = tokenizer_name or name
        self.url = base_url(options.endpoint)
        self.tokens_fed = 0
        self.server_calls = 0
        self.deadline: float | None = None
        self.max_context: int | None = None
        self.connected = False
        #: why the last connect failed ("" once one succeeds)
        self.connect_error = ""
        #: a standing problem the user must hear about even while requests succeed
        #: (e.g. the server ignores logit_bias: the model is the top-K truncation)
        self.warning = ""
        if options.dialect not in DIALECTS:
            raise ModelError(f"unknown server dialect {options.dialect!r}: one of {', '.join(DIALECTS)}")
        #: the protocol in use: "llamacpp" (llama-server's own endpoint) or "openai"
        self.dialect = "openai"
        #: the server's `owned_by` in /v1/models ("llamacpp", "vllm", "sglang", ...)
        self.software = ""
        self.model_name = options.model
        self.can_exclude = True
        self.can_enumerate = False
        self.server_vocab_size: int | None = None
        self._bias_is_raw = True
        #: the server leaves out positions whose text ends inside a UTF-8 character
        #: (learned from the first reply that does; continuations then avoid such tokens)
        self._leaves_out = False
        #: the length of a full distribution, when the server gives one (else None)
        self._full_size: int | None = None
        self._tokenizer_checked_by_endpoint = False
        self._bytes_checked = False
        self._prompt: tuple[int, ...] = ()
        self._max_new_tokens = 0
        self._cache: dict[tuple[int, ...], TopK] = {}
        #: per cached node, the request that computed it and its position in that reply
        self._origin: dict[tuple[int, ...], tuple[int, int]] = {}
        #: per request of the current prompt: [positions returned, positions the decoder used]
        self._replies: list[list[int]] = []
        self._ineligible: list[int] | None = None
        self._splitting: list[int] | None = None
        #: full distributions asked for (the tree enumerates a tail through them), per path
        self._full: dict[tuple[int, ...], np.ndarray] = {}
        #: per path, the tokens drawn out of its tail and their log-probabilities
        self._drawn: dict[tuple[int, ...], dict[int, float]] = {}
        self._client = None

    # -- HTTP ---------------------------------------------------------------------------
    def _http(self):
        if self._client is None:
            import httpx

            headers = {"Accept": "application/json"}
            key_name = self.options.api_key_env.strip()
            key = os.environ.get(key_name, "") if key_name else ""
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._client = httpx.Client(
                base_url=self.url,
                headers=headers,
                verify=ssl.create_default_context(),  # the system's certificate authorities
                follow_redirects=False,
                trust_env=False,  # no proxy or .netrc from the environment: only this host
                timeout=self.options.timeout_s,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _timeout(self) -> float:
        limit = float(self.options.timeout_s)
        if self.deadline is not None:
            left = self.deadline - time.perf_counter()
            if left <= 0.0:
                raise BudgetExceeded()
            limit = min(limit, left)
        return max(0.001, limit)

    def _request(self, method: str, path: str, body: dict | None = None, *, what: str = "") -> tuple[int, Any]:
        """(HTTP status, parsed JSON or None) of one request; raises EngineUnavailable
        (down, slow, too large, not JSON) or BudgetExceeded (the decode's budget ran out)."""
        import httpx

        timeout = self._timeout()
        started = time.perf_counter()
        self.server_calls += 1
        where = f"{self.url}{path}"
        try:
            with self._http().stream(method, path, json=body, timeout=timeout) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.options.max_response_bytes:
                        self.connected = False
                        raise EngineUnavailable(
                            f"the reply of {where} is larger than {self.options.max_response_bytes // 2**20} MiB: "
                            "lower serverTopLogprobs or serverLookahead, or check that the endpoint is an inference server"
                        )
                    chunks.append(chunk)
                status = response.status_code
                location = response.headers.get("location", "")
        except httpx.TimeoutException:
            self.connected = False
            if self.deadline is not None and time.perf_counter() >= self.deadline - 1e-3:
                raise BudgetExceeded() from None
            raise EngineUnavailable(
                f"the server at {self.url} did not answer {what or path} within {time.perf_counter() - started:.1f} s: "
                "check that it is running and not overloaded, or raise serverTimeoutMs"
            ) from None
        except httpx.HTTPError as error:
            self.connected = False
            reason = str(error) or type(error).__name__
            if "CERTIFICATE_VERIFY_FAILED" in reason or "SSL" in reason:
                raise EngineUnavailable(
                    f"the TLS certificate of {self.url} is not trusted ({reason}): add its certificate authority to the "
                    "system's, or name it in SSL_CERT_FILE for the language server (certificates are always verified)"
                ) from None
            raise EngineUnavailable(
                f"cannot reach the inference server at {self.url} ({reason}): start it, or set `endpoint` to where it runs"
            ) from None
        raw = b"".join(chunks)
        if 300 <= status < 400:
            raise EngineUnavailable(f"{where} redirects to {location or 'another URL'}: set `endpoint` to the server's own URL (redirects are not followed)")
        try:
            data = json.loads(raw) if raw else None
        except (ValueError, UnicodeDecodeError):
            self.connected = False
            if status >= 400:
                data = None
            else:
                raise EngineUnavailable(
                    f"{where} answered HTTP {status} with a reply that is not JSON (truncated or malformed, {len(raw)} bytes): "
                    "check that `endpoint` is an OpenAI-compatible inference server"
                ) from None
        return status, data

    @staticmethod
    def _error_text(data: Any) -> str:
        if isinstance(data, dict):
            error = data.get("error", data.get("detail", data.get("message")))
            if isinstance(error, dict):
                error = error.get("message", error)
            if error:
                return str(error)[:300]
        return ""

    def _post_completion(self, body: dict, what: str, path: str = "/v1/completions") -> dict:
        status, data = self._request("POST", path, body, what=what)
        if status in (401, 403):
            raise EngineUnavailable(self._auth_message(status))
        if status >= 400:
            detail = self._error_text(data)
            if status >= 500:
                self.connected = False
            raise EngineUnavailable(
                f"the server at {self.url} answered {what} with HTTP {status}{': ' + detail if detail else ''}"
                + ("; check the server's log" if status >= 500 else "")
            )
        if path == NATIVE_COMPLETION:
            if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
                self.connected = False
                raise EngineUnavailable(f"the llama-server at {self.url} answered {what} without its generated tokens: check its version (llama.cpp b6000 or later)")
            evaluated, cached = data.get("tokens_evaluated"), data.get("tokens_cached")
            if isinstance(evaluated, int) and isinstance(cached, int):
                self.tokens_fed += max(0, evaluated - cached)
            return data
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            self.connected = False
            raise EngineUnavailable(f"the server at {self.url} answered {what} without choices: it is not an OpenAI-compatible completions server")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens = usage.get("prompt_tokens")
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        cached = details.get("cached_tokens") or 0
        if isinstance(prompt_tokens, int) and isinstance(cached, int):
            self.tokens_fed += max(0, prompt_tokens - cached)  # the prompt tokens the server computed
        return data

    def _auth_message(self, status: int) -> str:
        name = self.options.api_key_env or "(none)"
        present = "is set" if self.options.api_key_env and os.environ.get(self.options.api_key_env) else "is not set"
        return (
            f"the server at {self.url} refused the request (HTTP {status}): put its API key in the environment "
            f"variable {name} (setting apiKeyEnv; it {present} for the language server)"
        )

    # -- replies ------------------------------------------------------------------------
    def _reply(self, data: dict, keep: int) -> Reply:
        """The generated positions of an OpenAI completion reply (the ``content`` list of
        llama-server, ids and bytes per entry; or the legacy lists with ``token_id:N``
        strings of vLLM and SGLang), each top list cut to the `keep` most probable (vLLM
        adds the sampled token to it).  Positions stop before the first one the server
        left out (see `Reply`): an entry whose bytes are more than its token's carries the
        bytes of tokens left out before it; fewer entries than generated tokens with no
        bytes to place them leaves no position known."""
        choice = data["choices"][0]
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        generated = usage.get("completion_tokens")
        generated = generated if isinstance(generated, int) and not isinstance(generated, bool) else None
        if not logprobs:
            text = choice.get("text") if isinstance(choice, dict) else None
            if generated and isinstance(text, str) and not text.strip("\ufffd"):
                # every token ended inside a character: llama-server rightly lists none
                return Reply([], left_out=True)
            self.connected = False
            raise EngineUnavailable(
                f"the server at {self.url} returns no log-probabilities: use llama-server, vLLM, SGLang or Ollama 0.12.11 or later"
            )
        try:
            positions: list[Position] = []
            left_out = False
            if isinstance(logprobs.get("content"), list):
                entries = logprobs["content"]
                every_entry_has_bytes = True
                for entry in entries:
                    if "id" not in entry:
                        raise KeyError("id")
                    token = int(entry["id"])
                    listed = entry.get("top_logprobs") or []
                    top = self._most_probable([(int(t["id"]), float(t["logprob"])) for t in listed], keep)
                    top_bytes = {int(t["id"]): bytes(t["bytes"]) for t in listed if isinstance(t.get("bytes"), list)}
                    if not isinstance(entry.get("bytes"), list):
                        every_entry_has_bytes = False
                    elif bytes(entry["bytes"]) != self._piece(token):
                        left_out = True  # the bytes of tokens left out before it: the rest is not aligned
                        break
                    positions.append(Position(token, float(entry["logprob"]), top, top_bytes))
                count = len(entries)
            else:
                tokens = logprobs["tokens"]
                values = logprobs["token_logprobs"]
                tops = logprobs.get("top_logprobs") or [None] * len(tokens)
                every_entry_has_bytes = False
                for token, value, top in zip(tokens, values, tops, strict=False):
                    listed = self._most_probable([(self._token_id(k), float(v)) for k, v in (top or {}).items()], keep)
                    positions.append(Position(self._token_id(token), float(value), listed, {}))
                count = len(tokens)
        except (KeyError, TypeError, ValueError) as error:
            self.connected = False
            raise EngineUnavailable(
                f"the server at {self.url} returns log-probabilities without token ids ({type(error).__name__}: {error}): "
                "a server that takes `return_tokens_as_token_ids` (vLLM, SGLang) or llama-server is needed"
            ) from None
        if generated is not None and count > generated:
            self.connected = False
            raise EngineUnavailable(
                f"the server at {self.url} returned log-probabilities for {count} positions of {generated} generated tokens: "
                "check that `endpoint` is an OpenAI-compatible inference server"
            )
        if generated is not None and count < generated and not left_out:
            left_out = True
            if not every_entry_has_bytes:
                positions = []  # left out somewhere, nothing tells where: no position is known
        return Reply(positions, left_out)

    @staticmethod
    def _most_probable(listed: list[tuple[int, float]], keep: int) -> list[tuple[int, float]]:
        """The `keep` most probable entries of a top list: no token outside them is more
        probable (`TopK.smallest` bounds the tail), which an extra sampled token breaks."""
        if len(listed) <= keep:
            return listed
        return sorted(listed, key=lambda pair: -pair[1])[:keep]

    def _native_reply(self, data: dict) -> Reply:
        """Every generated token of a llama-server `/completion` reply with its
        distribution, aligned by replaying the server's rule: a token after which the
        generated text ends inside a UTF-8 character gets no entry in
        ``completion_probabilities`` (its position has ``top = None``)."""
        entries = data.get("completion_probabilities")
        if entries is None and _all_incomplete(self, data["tokens"]):
            entries = []  # every token held back: the server rightly lists none
        if not isinstance(entries, list) or (data["tokens"] and not entries and not _all_incomplete(self, data["tokens"])):
            self.connected = False
            raise EngineUnavailable(
                f"the server at {self.url} returns no log-probabilities: use llama-server, vLLM, SGLang or Ollama 0.12.11 or later"
            )
        positions: list[Position] = []
        text = b""
        index = 0
        try:
            for raw_token in data["tokens"]:
                token = int(raw_token)
                text += self._piece(token)
                if _utf8_complete_length(text) < len(text):
                    positions.append(Position(token, math.nan, None, {}))
                    continue
                entry = entries[index]
                index += 1
                if int(entry["id"]) != token:
                    raise ValueError(f"its log-probabilities are for token {entry['id']}, the token generated was {token}")
                top = [(int(t["id"]), float(t["logprob"])) for t in entry.get("top_logprobs") or []]
                top_bytes = {int(t["id"]): bytes(t["bytes"]) for t in entry.get("top_logprobs") or [] if isinstance(t.get("bytes"), list)}
                positions.append(Position(token, float(entry["logprob"]), top, top_bytes))
        except (KeyError, TypeError, ValueError, IndexError) as error:
            self.connected = False
            raise EngineUnavailable(
                f"the llama-server at {self.url} gave log-probabilities that do not line up with its tokens ({error}): "
                "check that `tokenizer` is the served model's"
            ) from None
        return Reply(positions)

    def _piece(self, token: int) -> bytes:
        """The bytes llama.cpp adds to the generated text for `token` (special and
        padding ids: none that could split a character)."""
        if token < self.vocab.num_defined and token not in self.vocab.special_ids:
            return self.vocab.token_bytes[token]
        return b""

    def _splits_characters(self) -> list[int]:
        """Ids whose bytes end inside a UTF-8 character: llama-server reports no
        distribution for such a token (first in a reply), so a continuation computed
        ahead avoids them."""
        if self._splitting is None:
            self._splitting = [
                i for i in range(self.vocab.num_defined) if (piece := self._piece(i)) and _utf8_complete_length(piece) < len(piece)
            ]
        return self._splitting

    def _generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        logprobs: int,
        greedy: bool,
        seed: int | None,
        what: str,
        temperature: float = 1.0,
        banned: Sequence[int] = (),
        whole_characters: bool = False,
    ) -> Reply:
        """One completion request: the generated positions with the top `logprobs`
        (raw) of their distributions.  `banned`: ids given -inf (llama-server) or -100;
        `whole_characters`: also ban ids that end inside a UTF-8 character, so that a
        server that leaves such positions out (llama-server) reports every position (a
        tail draw must not: it is exact)."""
        body = self._body(prompt, max_tokens=max_tokens, logprobs=logprobs, greedy=greedy, seed=seed, temperature=temperature)
        avoid = sorted(set(banned) | set(self._splits_characters())) if whole_characters else list(banned)
        if self.dialect != "llamacpp":
            if avoid:
                body["logit_bias"] = self._exclusion(avoid)
            return self._reply(self._post_completion(body, what), keep=logprobs)
        native = {key: value for key, value in body.items() if key not in ("max_tokens", "logprobs", "model", "n", "echo")}
        native.update({"n_predict": max_tokens, "n_probs": logprobs, "return_tokens": True})
        if avoid:
            native["logit_bias"] = self._exclusion(avoid)
        return self._native_reply(self._post_completion(native, what, NATIVE_COMPLETION))

    @staticmethod
    def _token_id(text: str) -> int:
        if isinstance(text, str) and text.startswith("token_id:"):
            return int(text[len("token_id:") :])
        raise ValueError(f"token {text!r} is not given as an id")

    def _top(self, position: Position) -> TopK:
        ids = [token for token, _ in position.top]
        values = [value for _, value in position.top]
        exhaustive = self.server_vocab_size is not None and len(ids) >= self.server_vocab_size
        return TopK.of(ids, values, exhaustive=exhaustive, truncate=not self.can_exclude)

    # -- the connection -----------------------------------------------------------------
    def connect(self) -> None:
        """Check the server (see the module docstring); raises EngineUnavailable naming
        the fix (also kept in `connect_error` until a connect succeeds).  Sets `warning`
        when the server ignores logit_bias."""
        try:
            self._connect()
        except EngineUnavailable as error:
            self.connect_error = str(error)
            raise
        self.connect_error = ""

    def _connect(self) -> None:
        self.connected = False
        self.dialect = "openai"
        self.software = ""
        self._leaves_out = False
        self._full_size = None
        self._cache.clear()
        self._drawn.clear()
        self._full.clear()
        self._ineligible = None
        self._splitting = None
        status, data = self._request("GET", "/v1/models", what="the model list")
        if status in (401, 403):
            raise EngineUnavailable(self._auth_message(status))
        if status != 200 or not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise EngineUnavailable(
                f"{self.url} does not answer /v1/models like an OpenAI-compatible server (HTTP {status}): "
                "set `endpoint` to the inference server's base URL (e.g. http://127.0.0.1:8080 for llama-server, http://host:8000 for vLLM)"
            )
        served: list[str] = []
        meta: dict = {}
        for entry in data["data"]:
            if not isinstance(entry, dict):
                continue
            names = [entry.get("id")] + list(entry.get("aliases") or [])
            names = [str(n) for n in names if n]
            if not self.options.model or self.options.model in names:
                meta = entry
            served.extend(names)
            if isinstance(entry.get("owned_by"), str):
                self.software = entry["owned_by"]
        if self.software == "llamacpp" and self.options.dialect == "auto":
            self.dialect = "llamacpp"
        if not served:
            raise EngineUnavailable(f"the server at {self.url} lists no model under /v1/models: check that it has loaded one")
        if self.options.model:
            if self.options.model not in served:
                raise EngineUnavailable(
                    f"the server at {self.url} serves {', '.join(repr(n) for n in dict.fromkeys(served))}, "
                    f"not {self.options.model!r}: set serverModel to one of them (or leave it empty)"
                )
            self.model_name = self.options.model
        else:
            ids = [str(e.get("id")) for e in data["data"] if isinstance(e, dict) and e.get("id")]
            if len(ids) > 1:
                raise EngineUnavailable(
                    f"the server at {self.url} serves several models ({', '.join(repr(n) for n in ids)}): set serverModel to one of them"
                )
            self.model_name = ids[0] if ids else served[0]
        details = meta.get("meta") if isinstance(meta.get("meta"), dict) else {}
        vocab_size = details.get("n_vocab")
        self.server_vocab_size = int(vocab_size) if isinstance(vocab_size, int) else None
        if self.server_vocab_size is not None and self.server_vocab_size < self.vocab.num_defined:
            raise EngineUnavailable(
                f"the model served at {self.url} ({self.model_name!r}) has {self.server_vocab_size} tokens, "
                f"the tokenizer {self.tokenizer_name!r} {self.vocab.num_defined}: set `tokenizer` to the served model's tokenizer files"
            )
        context = details.get("n_ctx") or meta.get("max_model_len")
        if isinstance(context, int) and context > 0:
            self.max_context = int(context)
        if self.dialect == "llamacpp":
            self._read_llamacpp_context()
        self._check_tokenizer()
        self._check_logprobs()
        self._check_end_tokens()
        if not self._tokenizer_checked_by_endpoint and not self._bytes_checked:
            log.warning("the server at %s offers no /tokenize and no token bytes: the tokenizer %r could not be checked against it", self.url, self.tokenizer_name)
        self.connected = True
        log.info(
            "connected to %s (%s, %s, %s protocol): top %d log-probabilities, exclusion %s",
            self.url,
            self.model_name,
            self.software or "unknown server",
            self.dialect,
            self.options.top_logprobs,
            "exact" if self.can_exclude else "unavailable (top-K truncation)",
        )

    def _read_llamacpp_context(self) -> None:
        status, data = self._request("GET", "/props", what="its properties")
        if status == 200 and isinstance(data, dict):
            settings = data.get("default_generation_settings") or {}
            context = settings.get("n_ctx") or data.get("n_ctx")
            if isinstance(context, int) and context > 0:
                self.max_context = context

    def _check_tokenizer(self) -> None:
        checked = False
        for text in PROBE_TEXTS:
            ours = self.encode(text)
            body = {
                "content": text,
                "prompt": text,
                "model": self.model_name,
                "add_special": False,
                "add_special_tokens": False,
                "parse_special": False,
                "with_pieces": False,
            }
            status, data = self._request("POST", "/tokenize", body, what="/tokenize")
            if status == 404 or status == 405 or not isinstance(data, dict) or "tokens" not in data:
                break  # no tokenize endpoint: the bytes of the probes' ids are compared instead
            theirs = [int(t["id"]) if isinstance(t, dict) else int(t) for t in data["tokens"]]
            if theirs != ours:
                raise EngineUnavailable(
                    f"the tokenizer {self.tokenizer_name!r} does not match the model served at {self.url} ({self.model_name!r}): "
                    f"{text[:40]!r} is {ours[:12]} here and {theirs[:12]} on the server; "
                    "set `tokenizer` to the served model's tokenizer files (a folder or hub id)"
                )
            checked = True
        self._tokenizer_checked_by_endpoint = checked

    def _body(self, prompt: Sequence[int], *, max_tokens: int, logprobs: int, greedy: bool, seed: int | None, temperature: float = 1.0) -> dict:
        body: dict[str, Any] = {
            "model": self.model_name,
            "prompt": list(prompt),
            "max_tokens": max_tokens,
            "logprobs": logprobs,
            "temperature": 0.0 if greedy else temperature,
            **NEUTRAL_SAMPLERS,
        }
        if seed is not None:
            body["seed"] = int(seed)
        if self.dialect == "llamacpp":
            body.update(LLAMACPP_EXTRA)
        else:
            body.update(VLLM_EXTRA)
        return body

    def _exclusion(self, excluded: Sequence[int]) -> Any:
        if self.dialect == "llamacpp":
            return [[int(t), False] for t in excluded]  # false: -inf, an exact exclusion
        return {str(int(t)): -100 for t in excluded}  # the OpenAI range; exp(-100) leaks are repeated

    def _check_logprobs(self) -> None:
        """Log-probabilities with ids, as many as asked, raw; exclusion works and leaves
        the reported distributions raw; whether full distributions can be asked for."""
        k = self.options.top_logprobs
        probe = self.encode(PROBE_PROMPT)
        first = self._generate(
            probe, max_tokens=2, logprobs=k, greedy=True, seed=0, what="a log-probability probe", whole_characters=True
        ).positions
        if not first or not first[0].top:
            raise EngineUnavailable(f"the server at {self.url} returns no top log-probabilities: use llama-server, vLLM or SGLang")
        top = first[0].top
        wanted = min(k, self.server_vocab_size or k)
        if len(top) < wanted:
            raise EngineUnavailable(
                f"the server at {self.url} returned {len(top)} of the {k} top log-probabilities asked for: "
                f"set serverTopLogprobs to {len(top)} or fewer (vLLM: raise --max-logprobs)"
            )
        total = math.fsum(math.exp(v) for _, v in top)
        if total > 1.0 + 1e-3:
            raise EngineUnavailable(f"the server at {self.url} returns log-probabilities that sum to {total:.4f} > 1: they are not a distribution")
        self._check_bytes(first)
        # raw: a sampled request at another temperature reports the same log-probabilities
        other = self._generate(
            probe, max_tokens=1, logprobs=k, greedy=False, seed=1, temperature=0.5, what="a log-probability probe", whole_characters=True
        ).positions
        if not other or not other[0].top:
            raise EngineUnavailable(f"the server at {self.url} returned no log-probabilities for a sampled probe: check the server's log")
        ours, theirs = dict(top), dict(other[0].top)
        shared = set(ours) & set(theirs)
        if len(shared) < min(len(ours), 3) or any(abs(ours[t] - theirs[t]) > RAW_TOLERANCE for t in shared):
            raise EngineUnavailable(
                f"the server at {self.url} returns processed log-probabilities (they change with the temperature or other samplers): "
                "exactness needs the raw distribution (vLLM: start it with --logprobs-mode raw_logprobs)"
            )
        # exclusion: ban the most probable token; greedy must take the second, and its
        # log-probability tells whether the server reports it raw or renormalised
        best, best_logprob = top[0]
        second, second_logprob = top[1] if len(top) > 1 else (None, None)
        banned = self._generate(
            probe, max_tokens=1, logprobs=k, greedy=True, seed=0, banned=[best], what="a logit_bias probe", whole_characters=True
        ).positions
        if not banned or banned[0].top is None:
            raise EngineUnavailable(f"the server at {self.url} returned no log-probabilities for a logit_bias probe: check the server's log")
        got = banned[0]
        if got.token == best:
            self.can_exclude = False
            self.warning = (
                f"the server at {self.url} ignores logit_bias, so the tail of a top-{k} distribution cannot be drawn: "
                f"completions use the top-{k} truncation of the model (exact against that, not the full model); "
                "use llama-server or vLLM for exact sampling"
            )
            log.warning("%s", self.warning)
        else:
            self.can_exclude = True
            self.warning = ""
            listed = dict(got.top)
            if best not in listed or abs(listed[best] - best_logprob) > RAW_TOLERANCE:
                # a continuation computed ahead avoids some ids: its distributions must stay raw
                raise EngineUnavailable(
                    f"the server at {self.url} reports log-probabilities after applying logit_bias (a banned token is missing "
                    "from the top list or changed): exactness needs the raw distribution (vLLM: --logprobs-mode raw_logprobs)"
                )
            if second is not None and got.token == second:
                renormalised = second_logprob - math.log1p(-math.exp(best_logprob))
                if abs(got.logprob - second_logprob) <= RAW_TOLERANCE:
                    self._bias_is_raw = True
                elif abs(got.logprob - renormalised) <= RAW_TOLERANCE:
                    self._bias_is_raw = False
                else:
                    raise EngineUnavailable(
                        f"the server at {self.url} reports a log-probability under logit_bias that is neither raw nor renormalised "
                        f"({got.logprob:.4f} for a token of raw {second_logprob:.4f}): exact tail draws are impossible with it"
                    )
        if self.dialect == "llamacpp":
            self._full_size = self.server_vocab_size
        elif self.can_exclude:
            self._full_size = self.server_vocab_size or self._probe_full_distribution(probe)
        self.can_enumerate = self._full_size is not None

    def _check_end_tokens(self) -> None:
        """Special ids the server ends generation at that the tokenizer does not name an
        end (llama.cpp's end-of-generation set is wider than most tokenizers' EOS): they
        become end-of-sequence ids of `vocab`, so sequences end where the engine ends
        them.  Each is forced once (logit_bias +100, greedy, two tokens): the server ends
        at it when it generates it alone and stops."""
        if not self.can_exclude:
            return  # a server that ignores logit_bias cannot be made to generate a token
        candidates = sorted(t for t in self.vocab.special_ids if t not in self.vocab.eos_ids and t < self.vocab.num_defined)
        if not candidates:
            return
        if len(candidates) > MAX_END_PROBES:
            log.info("%d special tokens: not probed for where the server at %s ends generation", len(candidates), self.url)
            return
        probe = self.encode(PROBE_PROMPT)
        ends = [token for token in candidates if self._ends_generation(probe, token)]
        if ends:
            names = ", ".join(self.tokenizer.convert_ids_to_tokens(t) if hasattr(self.tokenizer, "convert_ids_to_tokens") else str(t) for t in ends)
            log.info("the server at %s ends generation at %s too: sequences end there", self.url, names)
            self.vocab = self.vocab.with_eos_ids(ends)
            self._ineligible = None

    def _ends_generation(self, prompt: Sequence[int], token: int) -> bool:
        """Whether the server stops right after generating `token` (forced by logit_bias)."""
        body = self._body(prompt, max_tokens=2, logprobs=1, greedy=True, seed=0)
        if self.dialect == "llamacpp":
            native = {key: value for key, value in body.items() if key not in ("max_tokens", "logprobs", "model", "n", "echo")}
            native.update({"n_predict": 2, "n_probs": 0, "return_tokens": True, "logit_bias": [[int(token), 100.0]]})
            data = self._post_completion(native, "an end-of-generation probe", NATIVE_COMPLETION)
            return [int(t) for t in data.get("tokens") or []] == [token] and data.get("stop_type") == "eos"
        body["logit_bias"] = {str(int(token)): 100}
        data = self._post_completion(body, "an end-of-generation probe")
        choice = data["choices"][0] if isinstance(data.get("choices"), list) and data["choices"] else {}
        if not isinstance(choice, dict) or choice.get("finish_reason") != "stop":
            return False
        positions = self._reply(data, keep=1).positions
        return [position.token for position in positions] == [token]

    def _probe_full_distribution(self, probe: Sequence[int]) -> int | None:
        """The vocabulary's size when the server lists that many log-probabilities (vLLM
        started with ``--max-logprobs -1``; one full distribution, once per connect),
        else None (vLLM refuses more than ``--max-logprobs``, 20 by default)."""
        size = self.vocab.size
        body = self._body(probe, max_tokens=1, logprobs=size, greedy=True, seed=0)
        body["logit_bias"] = self._exclusion(sorted(set(self._never_generated()) | set(self._splits_characters())))
        status, data = self._request("POST", "/v1/completions", body, what="a full-distribution probe")
        if status != 200 or not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            log.info("the server at %s gives no full distributions (HTTP %s): tails are drawn, never enumerated", self.url, status)
            return None
        positions = self._reply(data, keep=size).positions
        if not positions or positions[0].top is None or len(positions[0].top) < size:
            return None
        return size

    def _check_bytes(self, positions: Sequence[Position]) -> None:
        """The bytes the server gives for listed ids must be the tokenizer's."""
        self._bytes_checked = any(position.top_bytes for position in positions)
        for position in positions:
            for token, data in position.top_bytes.items():
                if token < self.vocab.num_defined and token not in self.vocab.special_ids and self.vocab.token_bytes[token] != data:
                    raise EngineUnavailable(
                        f"the tokenizer {self.tokenizer_name!r} does not match the model served at {self.url} ({self.model_name!r}): "
                        f"token {token} is {self.vocab.token_bytes[token]!r} here and {data!r} on the server; "
                        "set `tokenizer` to the served model's tokenizer files"
                    )

    def ensure_connected(self) -> None:
        """Connect (and check) unless connected; a reconnect that runs out of the
        request's budget is the server's fault, not a partial answer."""
        if self.connected:
            return
        try:
            self.connect()
        except BudgetExceeded:
            self.connect_error = (
                f"the server at {self.url} did not answer the connection checks within the request's time budget: "
                "check that it is running and not overloaded"
            )
            raise EngineUnavailable(self.connect_error) from None

    # -- LanguageModel ------------------------------------------------------------------
    def set_prompt(self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key: Hashable | None = None) -> PromptInfo:
        self.ensure_connected()
        ids = [int(t) for t in prompt_ids]
        truncated = 0
        if self.max_context is not None:
            room = max(1, self.max_context - max(0, int(max_new_tokens)) - 1)
            if len(ids) > room:
                truncated = len(ids) - room
                ids = ids[truncated:]
        prompt = tuple(ids)
        if prompt != self._prompt or len(self._cache) > MAX_CACHED_NODES:
            self._cache.clear()
            self._origin.clear()
            self._replies.clear()
            self._drawn.clear()
            self._full.clear()
        self._prompt = prompt
        self._max_new_tokens = max(1, int(max_new_tokens))
        return PromptInfo(length=len(ids), truncated=truncated)

    def _ahead(self, path: Sequence[int]) -> int:
        """Tokens one request may generate past `path`."""
        count = min(self.options.lookahead, max(1, self._max_new_tokens - len(path)))
        if self.max_context is not None:
            count = min(count, self.max_context - len(self._prompt) - len(path))
        if count < 1:
            raise ModelError(f"prompt and path fill the server's context of {self.max_context} tokens")
        return count

    def _fill(self, path: tuple[int, ...], positions: Sequence[Position]) -> None:
        """Cache the top-K of every position along the reply's continuation."""
        serial = len(self._replies)
        self._replies.append([len(positions), 1])
        node = path
        for depth, position in enumerate(positions):
            if position.top is not None and position.top and node not in self._cache:
                self._cache[node] = self._top(position)
                self._origin[node] = (serial, depth)
            node = node + (position.token,)
            self.tokens_fed += 1

    def _used(self, node: tuple[int, ...]) -> None:
        """Count a cached node as used by the decoder (it asked for its distribution)."""
        origin = self._origin.get(node)
        if origin is not None:
            reply = self._replies[origin[0]]
            reply[1] = max(reply[1], origin[1] + 1)

    def _next_lookahead(self, path: tuple[int, ...]) -> int | None:
        """The continuation to ask for at a node no reply has reached: the whole
        lookahead at the prompt's root; after it, twice the part of the last reply the
        decoder used (a reply followed to its end doubles, one left at its first position
        asks for two)."""
        if not path or not self._replies:
            return None
        return min(self.options.lookahead, 2 * self._replies[-1][1])

    def _never_generated(self) -> list[int]:
        """Special and padding ids (EOS excepted): a continuation computed ahead avoids
        them, since the tree never follows them (its distributions stay raw)."""
        if self._ineligible is None:
            top = self.server_vocab_size or self.vocab.size
            ids = set(range(self.vocab.num_defined, top)) | set(self.vocab.special_ids)
            self._ineligible = sorted(i for i in ids if i not in self.vocab.eos_ids and i < top)
        return self._ineligible

    def _complete(
        self, path: tuple[int, ...], *, greedy: bool, seed: int | None, excluded: Sequence[int] | None = None, what: str, ahead: int | None = None
    ) -> Reply:
        """One request continuing prompt + `path`; `excluded` (a tail draw): the ids the
        first token must not be (excluded at every position; the distributions reported
        are raw, so the positions after the first still fill the cache).  A continuation
        computed ahead avoids tokens that end inside a UTF-8 character where the server
        leaves their positions out (always on llama-server's own endpoint, which the
        backend knows to; on the OpenAI endpoint once a reply has shown it)."""
        self.ensure_connected()
        drawing = excluded is not None
        if drawing:
            banned = list(excluded)
        else:
            banned = self._never_generated() if self.can_exclude else []
        whole = not drawing and self.can_exclude and (self.dialect == "llamacpp" or self._leaves_out)
        reply = self._generate(
            list(self._prompt) + list(path),
            max_tokens=min(self._ahead(path), ahead or self.options.lookahead),
            logprobs=self.options.top_logprobs,
            greedy=greedy,
            seed=seed,
            banned=banned,
            whole_characters=whole,
            what=what,
        )
        if reply.left_out and not self._leaves_out:
            self._leaves_out = True
            log.info("the server at %s leaves out positions that end inside a UTF-8 character: continuations avoid such tokens", self.url)
        self._fill(path, reply.positions)
        return reply

    def next_top(self, path: Sequence[int], *, greedy: bool = True, seed: int | None = None) -> TopK:
        key = tuple(int(t) for t in path)
        cached = self._cache.get(key)
        if cached is not None:
            self._used(key)
            return cached
        reply = self._complete(key, greedy=greedy, seed=seed, what="a completion", ahead=self._next_lookahead(key))
        if key not in self._cache and reply.left_out and self.can_exclude:
            # the first token ended inside a character and its position was left out (the
            # first reply that showed this server does so): again, avoiding such tokens
            reply = self._complete(key, greedy=greedy, seed=seed, what="a completion")
        if key not in self._cache:
            raise EngineUnavailable(f"the server at {self.url} returned no distribution for a completion request: check the server's log")
        return self._cache[key]

    def draw_excluding(self, path: Sequence[int], excluded: Sequence[int], *, greedy: bool, seed: int) -> tuple[int, float] | None:
        if not self.can_exclude:
            raise ModelError(f"the server at {self.url} cannot exclude tokens")
        key = tuple(int(t) for t in path)
        banned = {int(t) for t in excluded}
        drawn_here = self._drawn.setdefault(key, {})
        for attempt in range(LEAK_RETRIES):
            reply = self._complete(key, greedy=greedy, seed=seed + attempt, excluded=sorted(banned), what="a tail draw", ahead=DRAW_LOOKAHEAD)
            if not reply.positions:
                if reply.left_out:
                    drawn_left_out = self._draw_left_out(key, banned, greedy=greedy, seed=seed + attempt)
                    if drawn_left_out is not None:
                        drawn_here[drawn_left_out[0]] = drawn_left_out[1]
                    return drawn_left_out
                return None
            drawn = reply.positions[0]
            if drawn.token not in banned:
                logprob = drawn.logprob
                if drawn.top is None:  # a token inside a UTF-8 character: no entry; look it up
                    logprob = float(self.next_logprobs(key)[drawn.token]) if drawn.token < self.vocab.size else -math.inf
                if not self._bias_is_raw:  # renormalised over the allowed ids: back to the raw P
                    listed = self.next_top(key)
                    known = dict(zip(listed.ids.tolist(), listed.logprobs.tolist()))
                    known.update(drawn_here)
                    kept = 1.0 - math.fsum(math.exp(known[t]) for t in banned if t in known)
                    logprob += math.log(kept) if kept > 0.0 else -math.inf
                drawn_here[drawn.token] = logprob
                return drawn.token, logprob
            if greedy:
                return None  # every allowed token is below exp(-100) of an excluded one: an empty tail
        return None

    def _draw_left_out(self, key: tuple[int, ...], banned: set[int], *, greedy: bool, seed: int) -> tuple[int, float] | None:
        """The server drew a token out of the tail but left its position out (it ends
        inside a UTF-8 character), so which token it was is unknown.  What is known is
        exact: the draw fell in the part of the tail that is left out, the tokens that
        end inside a character; a token drawn from P restricted to that part (its argmax
        when `greedy`), through the full distribution, is then an exact draw from the
        tail (the rest of that reply is never used)."""
        if not self.can_enumerate:
            raise EngineUnavailable(
                f"the server at {self.url} left out the log-probability of the token it drew from a tail (one that ends inside "
                "a UTF-8 character) and gives no full distribution to tell which it was: use llama-server or vLLM, "
                "which report every position with its token id (vLLM) or give full distributions (llama-server)"
            )
        full = self.next_logprobs(key)
        left_out = np.array([t for t in self._splits_characters() if t not in banned and t < full.size], dtype=np.int64)
        weights = np.exp(full[left_out]) if left_out.size else np.zeros(0)
        if not weights.size or weights.max() <= 0.0:
            raise EngineUnavailable(
                f"the server at {self.url} left a drawn token's position out, but no token of the tail ends inside a UTF-8 "
                "character: its positions cannot be matched to tokens; check that `tokenizer` is the served model's"
            )
        if greedy:
            index = int(np.argmax(weights))
        else:
            index = int(np.random.default_rng(seed).choice(weights.size, p=weights / weights.sum()))
        token = int(left_out[index])
        return token, float(full[token])

    def knows_full(self, path: Sequence[int]) -> bool:
        return tuple(int(t) for t in path) in self._full

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        """The full distribution (the server lists the whole vocabulary: llama-server's
        n_probs, vLLM's logprobs under ``--max-logprobs -1``), one request."""
        size = self._full_size
        if not self.can_enumerate or size is None:
            raise ModelError(f"the server at {self.url} gives top-K distributions only")
        key = tuple(int(t) for t in path)
        cached = self._full.get(key)
        if cached is not None:
            return cached
        self.ensure_connected()
        positions = self._generate(
            list(self._prompt) + list(key),
            max_tokens=1,
            logprobs=size,
            greedy=True,
            seed=0,
            banned=self._never_generated(),
            whole_characters=True,
            what="a full distribution",
        ).positions
        if not positions or positions[0].top is None:
            raise EngineUnavailable(f"the server at {self.url} returned no distribution for a full-distribution request")
        if len(positions[0].top) < size:
            raise EngineUnavailable(
                f"the server at {self.url} listed {len(positions[0].top)} of the {size} log-probabilities of a full distribution: "
                "check the server's log (vLLM: --max-logprobs -1)"
            )
        values = np.full(max(self.vocab.size, size), -np.inf)
        for token, value in positions[0].top:
            values[token] = value
        self.tokens_fed += 1
        values = values[: self.vocab.size]
        if len(self._full) < MAX_FULL_CACHED:
            self._full[key] = values
        return values

    def encode(self, text: str) -> list[int]:
        return encode_ids(self.tokenizer, text)


# -- loading ------------------------------------------------------------------------------
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "generation_config.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


def resolve_tokenizer_source(name_or_path: str) -> str:
    """The folder of the tokenizer files for a `tokenizer` setting: ``tiny`` (the built-in
    model's), an absolute folder, or a hub id (from the Hugging Face cache; downloaded
    unless HF_HUB_OFFLINE)."""
    from adaptrack_lsp.config import is_hub_id

    if name_or_path == "tiny":
        from adaptrack_lsp.completion.lm.tiny import tiny_model_path

        return str(tiny_model_path())
    if name_or_path == "builtin":
        raise ModelError(
            "the built-in model runs in process (an n-gram model no inference server serves); "
            "set `tokenizer` to the served model's tokenizer files (a folder or hub id), or `backend` to auto"
        )
    if is_hub_id(name_or_path):
        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        try:
            from huggingface_hub import snapshot_download

            return snapshot_download(name_or_path, allow_patterns=list(TOKENIZER_FILES), local_files_only=offline)
        except Exception as error:
            raise ModelError(
                f"cannot get the tokenizer {name_or_path!r} from the Hugging Face hub "
                f"({'offline mode' if offline else 'not reachable or not found'}: {type(error).__name__}); "
                "set `tokenizer` to a local folder holding the served model's tokenizer files"
            ) from error
    path = Path(name_or_path).expanduser()
    if not path.is_absolute():
        raise ModelError(f"tokenizer path {name_or_path!r} is relative; give an absolute path (or ~/...)")
    if not path.is_dir() or not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise ModelError(f"{path} holds no tokenizer files (tokenizer.json): set `tokenizer` to the served model's tokenizer folder")
    return str(path)


def _folder_json(folder: str, name: str) -> dict:
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _ids(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def load_tokenizer(name_or_path: str):
    """(tokenizer, vocabulary) from a tokenizer folder or hub id; the vocabulary has the
    model's logits width and EOS ids when the folder holds config.json /
    generation_config.json.  Without transformers (the light core) the folder's
    tokenizer.json is read with `tokenizers` alone."""
    from adaptrack_lsp.completion.tokenizer_bytes import (
        load_fast_tokenizer,
        round_trip_mismatches,
        vocabulary_from_tokenizer,
    )
    from adaptrack_lsp.extras import install_command, present

    folder = resolve_tokenizer_source(name_or_path)
    config_eos: list[int] = []
    try:
        if present("transformers"):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        else:
            tokenizer, config_eos = load_fast_tokenizer(folder)
    except Exception as error:
        fix = "" if present("transformers") else f"; for tokenizers without a tokenizer.json: {install_command('transformers')}"
        raise ModelError(f"cannot load the tokenizer in {folder}: {type(error).__name__}: {error}{fix}") from error
    config = _folder_json(folder, "config.json")
    text_config = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    generation = _folder_json(folder, "generation_config.json")
    logits = text_config.get("vocab_size")
    count = len(tokenizer) if hasattr(tokenizer, "__len__") else tokenizer.get_vocab_size(with_added_tokens=True)
    extra_eos = _ids(text_config.get("eos_token_id")) + _ids(generation.get("eos_token_id")) + config_eos
    try:
        vocab = vocabulary_from_tokenizer(
            tokenizer, logits_size=logits if isinstance(logits, int) and logits >= count else None, extra_eos_ids=extra_eos
        )
    except ValueError as error:
        raise ModelError(f"unsupported tokenizer {name_or_path!r}: {error}") from error
    mismatches = round_trip_mismatches(tokenizer, vocab, PROBE_TEXTS)
    if mismatches:
        text, got = mismatches[0]
        raise ModelError(f"the tokenizer {name_or_path!r} does not map to exact bytes: {text!r} -> {got!r}")
    return tokenizer, vocab


def load_from_settings(settings, progress=None, *, dialect: str = "auto") -> ServerLanguageModel:
    """The `server` backend for `settings` (`endpoint`, `tokenizer` or `model`,
    `serverModel`, `apiKeyEnv`, `serverTopLogprobs`, `serverLookahead`,
    `serverTimeoutMs`); `dialect` as `ServerOptions.dialect` (not a setting: "auto"
    picks the best protocol each server has).  A server that cannot be reached (or
    fails a check) does not fail the load: the model is returned unconnected with the
    problem in `connect_error`, and every request tries again (the status says
    `degraded`)."""
    progress = progress or (lambda message, percentage=None: None)
    source = settings.tokenizer or settings.model
    options = ServerOptions(
        endpoint=settings.endpoint,
        model=settings.server_model,
        api_key_env=settings.api_key_env,
        top_logprobs=settings.server_top_logprobs,
        lookahead=settings.server_lookahead,
        timeout_s=settings.server_timeout_ms / 1000.0,
        dialect=dialect,
    )
    base_url(options.endpoint)  # a bad endpoint is a settings error: fail the load with it
    progress(f"loading the tokenizer {source}", 20)
    tokenizer, vocab = load_tokenizer(source)
    lm = ServerLanguageModel(options, tokenizer, vocab, name=f"{source} @ {base_url(options.endpoint)}", tokenizer_name=source)
    progress(f"connecting to {lm.url}", 50)
    try:
        lm.connect()
    except EngineUnavailable as error:
        log.warning("%s", error)
    return lm
