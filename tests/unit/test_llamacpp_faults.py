"""Bad input for the llamacpp backend: each a `ModelError` naming what to change, never a
fallback to another model; and llama.cpp's own log kept off stdout and stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from llamacpp_support import require_llama_cpp

require_llama_cpp()

from adaptrack_lsp.completion.lm import llamacpp
from adaptrack_lsp.completion.lm.base import ModelError
from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp, tiny_gguf_path
from adaptrack_lsp.config import Settings

gguf = pytest.importorskip("gguf")


def rewrite_gguf(source: Path, target: Path, drop=lambda key: False, change=None) -> Path:
    """A copy of `source` with metadata keys dropped (`drop(key)`) or replaced
    (`change(key, value) -> value`), tensors unchanged."""
    reader = gguf.GGUFReader(str(source))
    architecture = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(target), architecture)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or drop(key):
            continue
        value = field.contents()
        if change is not None:
            value = change(key, value)
        sub_type = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, field.types[0], sub_type)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


def test_an_unchanged_copy_loads(tmp_path):
    copy = rewrite_gguf(tiny_gguf_path(), tmp_path / "copy.gguf")
    lm = load_llamacpp(str(copy))
    lm.set_prompt(lm.encode("import numpy as np\n"))
    assert np.isfinite(lm.next_logprobs([])[: lm.vocab.num_defined]).all()


def test_missing_file_folder_and_relative_path_name_the_fix(tmp_path):
    with pytest.raises(ModelError, match=r"does not exist.*export-gguf"):
        load_llamacpp(str(tmp_path / "nowhere.gguf"))
    with pytest.raises(ModelError, match=r"is a folder.*export-gguf --model .*OUT.gguf.*backend transformers"):
        load_llamacpp(str(tmp_path))
    with pytest.raises(ModelError, match="relative"):
        load_llamacpp("models/tiny.gguf")
    with pytest.raises(ModelError, match="no GGUF form"):
        load_llamacpp("builtin")


def test_a_file_that_is_not_gguf_is_named(tmp_path):
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    for path in (tiny_model_path() / "model.safetensors", tmp_path / "empty.gguf"):
        if not path.exists():
            path.write_bytes(b"")
        with pytest.raises(ModelError, match="is not a GGUF file"):
            load_llamacpp(str(path))


def test_a_truncated_gguf_is_called_corrupt(tmp_path):
    data = tiny_gguf_path().read_bytes()
    for size in (len(data) // 2, 64):
        truncated = tmp_path / f"truncated-{size}.gguf"
        truncated.write_bytes(data[:size])
        with pytest.raises(ModelError, match=r"corrupt or truncated.*again"):
            load_llamacpp(str(truncated))


def test_a_gguf_without_a_tokenizer_says_so(tmp_path):
    bare = rewrite_gguf(tiny_gguf_path(), tmp_path / "bare.gguf", drop=lambda key: key.startswith("tokenizer."))
    with pytest.raises(ModelError, match=r"has no tokenizer.*tokenizer.json"):
        load_llamacpp(str(bare))


def test_a_vocabulary_that_differs_from_the_weights_is_named(tmp_path):
    def shorter(key, value):
        return value[:-16] if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type") else value

    cut = rewrite_gguf(tiny_gguf_path(), tmp_path / "cut.gguf", change=shorter)
    with pytest.raises(ModelError, match=r"vocabulary .*6000 tokens.*differs from its weights.*6016 rows"):
        load_llamacpp(str(cut))


def test_a_tokenizer_setting_that_disagrees_with_the_gguf_names_both():
    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer, tiny_model_path

    with pytest.raises(ModelError, match=r"does not match the vocabulary of .*tiny-f32.gguf.*tokenizer setting empty"):
        load_llamacpp("tiny", tokenizer=build_large_tokenizer(151_643))
    assert load_llamacpp("tiny", tokenizer=str(tiny_model_path())).vocab.size == 6016  # the model's own agrees


def test_bad_engine_options_are_errors_not_crashes():
    with pytest.raises(ModelError, match="threads"):
        load_llamacpp("tiny", threads=0)
    with pytest.raises(ModelError, match="max_sequences"):
        load_llamacpp("tiny", max_sequences=1000)
    with pytest.raises(ModelError, match="KV cache type"):
        load_llamacpp("tiny", kv_type="f8")
    lm = load_llamacpp("tiny", threads=2, gpu_layers=0, batch_tokens=8, max_sequences=16)  # batch < sequences
    assert lm.engine.threads == 2 and lm.engine.gpu_layers == 0
    lm.set_prompt(lm.encode("import numpy as np\nvalues = np.linalg."))  # fed in chunks of 8
    assert lm.tokens_fed > 8


def test_without_llama_cpp_python_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setattr(llamacpp, "_llama", None)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelError, match=r"llama-cpp-python.*adaptrack-lsp\[llamacpp\].*backend transformers"):
        load_llamacpp("tiny")


def test_the_model_host_reports_a_bad_gguf_without_falling_back(tmp_path):
    from adaptrack_lsp.completion.model_host import ModelHost, ServiceNotReady

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    host = ModelHost()
    try:
        with pytest.raises(ServiceNotReady) as error:
            host.load(Settings(model=str(bad)))
        assert host.state == "error" and host.model is None
        assert "bad.gguf" in str(error.value) and "corrupt or truncated" in str(error.value)
        host.load(Settings(model=str(tiny_gguf_path()), device="cpu"))  # a good file then loads
        assert host.ready and type(host.model).__name__ == "LlamaCppLanguageModel"
        assert host.builder.fim is not None  # FIM from the GGUF
    finally:
        host.close()


def test_transformers_refuses_a_gguf_and_names_the_backend():
    from adaptrack_lsp.completion.lm.loading import load_model

    with pytest.raises(ModelError, match=r"GGUF file.*llamacpp backend"):
        load_model(str(tiny_gguf_path()))


LOAD_AND_DECODE = textwrap.dedent(
    """
    import sys
    from adaptrack_lsp.completion.lm.base import ModelError
    from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp
    lm = load_llamacpp({path!r})
    lm.set_prompt(lm.encode("import numpy as np\\nvalues = np."))
    lm.next_logprobs(lm.encode("linalg"))
    try:
        load_llamacpp({bad!r})
    except ModelError:
        pass
    """
)


def test_llama_cpp_writes_nothing_to_stdout_or_stderr(tmp_path):
    """In `serve`, stdout is the protocol stream: llama.cpp's log goes to the logger, and
    no file descriptor is redirected (which would swallow other threads' messages)."""
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(tiny_gguf_path().read_bytes()[:200_000])
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_DECODE.format(path=str(tiny_gguf_path()), bad=str(bad))],
        capture_output=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""
    assert b"llama" not in done.stderr and b"gguf" not in done.stderr.lower(), done.stderr.decode()[-2000:]


QUANTIZED_DECODE = textwrap.dedent(
    """
    from adaptrack_lsp.completion.lm.gguf_export import export_gguf
    from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp
    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    for outtype in ("q8_0", "q4_k_m"):
        path = {folder!r} + f"/tiny-{{outtype}}.gguf"
        export_gguf(tiny_model_path(), path, outtype)
        lm = load_llamacpp(path)
        lm.set_prompt(lm.encode("import numpy as np\\nvalues = np."))
        print(outtype, float(lm.next_logprobs(lm.encode("linalg")).max()))
    """
)


def test_quantized_ggufs_decode_on_this_cpu(tmp_path):
    """Q8_0 and Q4_K_M decode (in a child process: a crash in llama.cpp's CPU kernels, as
    its AMX kernels had on AMX Xeons, would otherwise take pytest down with it)."""
    done = subprocess.run(
        [sys.executable, "-c", QUANTIZED_DECODE.format(folder=str(tmp_path))], capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["q8_0", "q4_k_m"]


def test_the_settings_reach_the_engine():
    from adaptrack_lsp.completion.lm.llamacpp import load_from_settings

    lm = load_from_settings(Settings(model=str(tiny_gguf_path()), threads=2, gpu_layers=0))
    assert (lm.engine.threads, lm.engine.gpu_layers) == (2, 0)
    lm = load_from_settings(Settings(model="tiny", device="cpu"))  # no GPU layers on the CPU device
    assert lm.engine.gpu_layers == 0 and lm.engine.threads == 1  # a small model: one thread
