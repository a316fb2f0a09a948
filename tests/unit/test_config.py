"""Settings: defaults, camelCase wire names, per-field validation that never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adaptrack_lsp.config import DEFAULT_MODEL, Settings, parse_settings, settings_to_wire


def test_defaults_match_the_protocol_contract():
    wire = settings_to_wire(Settings())
    assert wire == {
        "model": DEFAULT_MODEL,
        "device": "auto",
        "dtype": "auto",
        "kvCache": "auto",
        "threads": None,
        "gpuLayers": None,
        "decoder": "adaptrack",
        "listDecoder": "exact",
        "temperature": 0.0,
        "numSamples": 5,
        "maxNewTokens": 48,
        "contextTokens": None,
        "maxBacktrackDistance": None,
        "topPValidity": 1.0,
        "pythonPath": None,
        "apiSnapshot": None,
        "versionTargets": [],
        "runtimeIntrospection": True,
        "keywordArguments": True,
        "timeoutMs": 3000,
        "multiline": False,
        "diagnostics": "warning",
        "avoidDeprecated": False,
        "syntaxConstraint": True,
        "trustRemoteCode": False,
        "backend": "auto",
        "endpoint": "",
        "tokenizer": "",
        "serverModel": "",
        "apiKeyEnv": "ADAPTRACK_API_KEY",
        "serverTopLogprobs": 20,
        "serverLookahead": 32,
        "serverTimeoutMs": 10000,
        "trustedWorkspace": False,
    }
    assert DEFAULT_MODEL == "builtin"  # offline: built on this machine at first use


def test_engine_thread_and_gpu_layer_settings_are_checked():
    parsed, problems = parse_settings({"threads": 4, "gpuLayers": 0})
    assert (parsed.threads, parsed.gpu_layers) == (4, 0) and not problems
    assert {"threads", "gpu_layers"} <= set(Settings.MODEL_FIELDS)  # a change loads the model again
    parsed, problems = parse_settings({"threads": 0, "gpuLayers": -1})
    assert parsed.threads is None and parsed.gpu_layers is None
    assert len(problems) == 2 and "threads" in problems[0] and "gpuLayers" in problems[1]
    assert parse_settings({"threads": 2}, Settings(threads=8))[0].threads == 2
    assert parse_settings({"threads": None}, Settings(threads=8))[0].threads is None  # null: the default


def test_kv_cache_setting_is_checked():
    parsed, problems = parse_settings({"kvCache": "dynamic"})
    assert parsed.kv_cache == "dynamic" and not problems
    assert "kv_cache" in Settings.MODEL_FIELDS  # a change loads the model again
    parsed, problems = parse_settings({"kvCache": "fast", "device": "cuda"})
    assert parsed.kv_cache == "auto" and parsed.device == "cuda"
    assert len(problems) == 1 and "kvCache" in problems[0] and "auto, static, dynamic" in problems[0]


def test_camel_case_values_are_read():
    parsed, problems = parse_settings(
        {"model": "tiny", "numSamples": 3, "maxBacktrackDistance": 2, "topPValidity": 0.9, "timeoutMs": 500,
         "multiline": True, "pythonPath": "/usr/bin/python3", "decoder": "constrained", "device": "cuda:1"}
    )
    assert problems == []
    assert parsed.model == "tiny" and parsed.num_samples == 3 and parsed.max_backtrack_distance == 2
    assert parsed.top_p_validity == 0.9 and parsed.timeout_ms == 500 and parsed.multiline is True
    assert parsed.python_path == "/usr/bin/python3" and parsed.decoder == "constrained" and parsed.device == "cuda:1"


def test_section_wrapper_and_snake_case_are_accepted():
    parsed, problems = parse_settings({"adaptrack": {"max_new_tokens": 12}})
    assert problems == [] and parsed.max_new_tokens == 12


def test_invalid_values_keep_defaults_and_name_the_setting():
    parsed, problems = parse_settings(
        {"numSamples": "3", "temperature": True, "topPValidity": 0, "device": "gpu", "decoder": "nope",
         "maxNewTokens": 2.5, "timeoutMs": -1, "model": "  ", "multiline": "yes", "maxBacktrackDistance": -1}
    )
    assert parsed == Settings()
    named = " ".join(problems)
    for key in ["numSamples", "temperature", "topPValidity", "device", "decoder", "maxNewTokens", "timeoutMs",
                "model", "multiline", "maxBacktrackDistance"]:
        assert f"'{key}'" in named
    assert len(problems) == 10
    assert "adaptrack" in next(p for p in problems if "'decoder'" in p)  # lists the valid names


def test_one_bad_field_does_not_cost_the_others():
    parsed, problems = parse_settings({"model": "tiny", "numSamples": "many"})
    assert parsed.model == "tiny" and parsed.num_samples == 5 and len(problems) == 1


def test_updates_merge_over_the_current_settings_and_null_restores_default():
    current, _ = parse_settings({"model": "tiny", "temperature": 0.7, "apiSnapshot": "/tmp/s.json"})
    updated, problems = parse_settings({"adaptrack": {"numSamples": 2, "temperature": None, "apiSnapshot": None}}, current)
    assert problems == []
    assert updated.model == "tiny" and updated.num_samples == 2
    assert updated.temperature == 0.0 and updated.api_snapshot is None


def test_unknown_keys_are_ignored_and_non_objects_reported():
    parsed, problems = parse_settings({"trace": {"server": "verbose"}, "model": "tiny"})
    assert problems == [] and parsed.model == "tiny"
    parsed, problems = parse_settings(["model", "tiny"])
    assert parsed == Settings() and len(problems) == 1
    assert parse_settings(None) == (Settings(), [])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
keys = st.sampled_from(list(settings_to_wire(Settings())) + ["adaptrack", "other"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, json_values, max_size=6) | json_values)
def test_parse_settings_never_raises(raw):
    parsed, problems = parse_settings(raw)
    assert isinstance(parsed, Settings)
    assert all(isinstance(p, str) for p in problems)


def test_engine_settings_are_checked_and_reload_the_model():
    parsed, problems = parse_settings({"backend": "server", "endpoint": "https://llm.example.org/v1", "serverTopLogprobs": 5})
    assert not problems and parsed.backend == "server" and parsed.server_top_logprobs == 5
    assert {"backend", "endpoint", "tokenizer", "server_model", "api_key_env"} <= set(Settings.MODEL_FIELDS)
    parsed, problems = parse_settings({"backend": "cloud", "serverLookahead": 0, "serverTimeoutMs": 10})
    assert parsed == Settings() and len(problems) == 3
    assert "auto, transformers, llamacpp, server" in problems[0]
