"""TFv1 selection rules (paper §6.1), prompt shape (Figure 3) and oracles per setting."""

import pytest

from adaptrack_lsp.evaluation.tfv1 import (
    build_tfv1,
    select_tfv1_apis,
    tfv1_prompt,
    v1_setting_names,
)

NAMES = [
    "tensorflow.losses",
    "tensorflow.losses.log_loss",  # a TF 2 API with last part log_loss
    "tensorflow.compat.v1.losses",
    "tensorflow.compat.v1.losses.mean_pairwise_squared_error",  # kept
    "tensorflow.compat.v1.losses.log_loss",  # has a v2 counterpart by last part
    "tensorflow.compat.v1.losses.Reduction",  # upper-case part
    "tensorflow.compat.v1.get_variable",  # kept
    "tensorflow.compat.v1.nn",
    "tensorflow.compat.v1.nn.rnn_cell",  # a prefix of another API (module)
    "tensorflow.compat.v1.nn.rnn_cell.static_rnn_helper",  # kept
    "tensorflow.compat.v1.Session",  # upper-case
    "tensorflow.compat.v1.compat.v2.compat.v1.get_variable",  # mirror loop: skipped
    "tensorflow.compat.v1._private_helper",  # does not start with a lower-case letter
    "tensorflow.compat.v2.wrap_function",  # not under compat.v1
]


def test_selection_rules():
    assert select_tfv1_apis(NAMES) == [
        "get_variable",
        "losses.mean_pairwise_squared_error",
        "nn.rnn_cell.static_rnn_helper",
    ]


def test_modules_are_never_items():
    names = NAMES + ["tensorflow.compat.v1.app.flags"]
    assert "app.flags" in select_tfv1_apis(names)  # a module listed without its members
    kinds = {"tensorflow.compat.v1.app.flags": "module"}
    assert "app.flags" not in select_tfv1_apis(names, kinds)


def test_tf_prefixed_names_give_the_same_selection():
    assert select_tfv1_apis([n.replace("tensorflow.", "tf.", 1) for n in NAMES]) == select_tfv1_apis(NAMES)


def test_prompt_is_figure_3():
    assert tfv1_prompt("losses.mean_pairwise_squared_error") == (
        "import tensorflow as tf\n"
        "\n"
        "def mean_pairwise_squared_error(*args, **kwargs):\n"
        '    """\n'
        "    wrapper for losses.mean_pairwise_squared_error\n"
        '    """\n'
        "    return tf"
    )


@pytest.mark.parametrize(
    "setting, oracle",
    [("v1", ".losses.mean_pairwise_squared_error"), ("v2", ".compat.v1.losses.mean_pairwise_squared_error")],
)
def test_oracle_per_setting(setting, oracle):
    items = {i.item_id: i for i in build_tfv1(NAMES, setting)}
    assert items["losses.mean_pairwise_squared_error"].oracle == oracle
    assert items["losses.mean_pairwise_squared_error"].prompt.endswith("return tf")


def test_unknown_setting_is_an_error():
    with pytest.raises(ValueError, match="unknown TFv1 setting"):
        build_tfv1(NAMES, "v3")


def test_v1_setting_names_drop_the_compat_prefix():
    names = v1_setting_names(NAMES)
    assert "tensorflow.losses.mean_pairwise_squared_error" in names
    assert "tensorflow.losses.log_loss" in names
    assert "tensorflow.nn.rnn_cell.static_rnn_helper" in names
    assert not any(n.startswith("tf.compat.v2") or ".compat." in n for n in names)
