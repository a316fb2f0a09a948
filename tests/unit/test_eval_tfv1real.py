"""TFv1Real builder (paper §6.2) on files the test writes, and the JSONL loader."""

import json

import pytest

from adaptrack_lsp.evaluation.items import write_items_jsonl
from adaptrack_lsp.evaluation.tfv1real import (
    build_tfv1real,
    load_or_build,
    load_tfv1real,
    split_file,
)

GOOD = '''import numpy as np
import tensorflow as tf

# tf.compat.v1.placeholder in a comment does not count
DOC = "tf.compat.v1.Session in a string does not count either"


def model(x):
    y = tf.compat.v1.layers.dense(x, 3)
    return tf.compat.v1.nn.relu(y)
'''


def write(folder, name, text):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_split_skips_comments_and_strings_but_drops_prefixes_that_mention_the_api():
    # the comment and string occurrences are not the split point, but they are in the
    # prefix, so the file is dropped (the paper removes files whose prefix contains it)
    assert split_file(GOOD) == "prefix_mentions_tf_compat_v1"


def test_split_point_and_oracle():
    text = "import tensorflow as tf\n\nx = 1  # tf.compat is fine here\ny = tf.compat.v1.losses.log_loss(a, b)\n"
    prompt, oracle = split_file(text)
    assert prompt == "import tensorflow as tf\n\nx = 1  # tf.compat is fine here\ny = tf"
    assert oracle == ".compat.v1.losses.log_loss"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("import tensorflow\nx = tf.compat.v1.zeros(3)\n", "no_import_tensorflow_as_tf"),
        ("import tensorflow as tf\nx = tf.compat.v1.float32\n", "suffix_not_an_api_call"),
        ("import tensorflow as tf\nx = tf.zeros(3)\n", "no_tf_compat_v1_in_code"),
        ('import tensorflow as tf\ns = "tf.compat.v1.zeros(3)"\n', "no_tf_compat_v1_in_code"),
        ("import tensorflow as tf\nprint 'python 2'\nx = (\n", "not_python3_tokenizable"),
    ],
)
def test_drop_reasons(text, reason):
    assert split_file(text) == reason


def test_builder_on_a_folder(tmp_path):
    keep = "import tensorflow as tf\n\n\ndef f(x):\n    return tf.compat.v1.image.resize_bilinear(x, [2, 2])\n"
    write(tmp_path, "a/keep.py", keep)
    write(tmp_path, "b/duplicate.py", keep)  # identical file: deduped
    write(tmp_path, "c/long.py", "import tensorflow as tf\n" + "x = 1\n" * 400 + "y = tf.compat.v1.zeros([1])\n")
    write(tmp_path, "d/comment.py", GOOD)
    write(tmp_path, "e/other.txt", keep)  # not a .py file
    items, report = build_tfv1real(tmp_path, count_tokens=lambda text: len(text.split()), max_prompt_tokens=100)
    assert [i.item_id for i in items] == ["a/keep.py"]
    assert items[0].prompt.endswith("return tf")
    assert items[0].oracle == ".compat.v1.image.resize_bilinear"
    assert report.files == 4
    assert report.dropped["duplicate_file"] == 1
    assert report.dropped["prompt_too_long"] == 1
    assert report.dropped["prefix_mentions_tf_compat_v1"] == 1


def test_jsonl_round_trip_and_errors(tmp_path):
    items, _ = build_tfv1real(
        write(tmp_path, "src/x.py", "import tensorflow as tf\nz = tf.compat.v1.zeros([1])\n").parent, count_tokens=len
    )
    path = tmp_path / "data.jsonl"
    write_items_jsonl(items, path)
    loaded = load_tfv1real(path)
    assert [(i.prompt, i.oracle) for i in loaded] == [(i.prompt, i.oracle) for i in items]
    assert load_or_build(path, None)[0][0].oracle == ".compat.v1.zeros"

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prefix": "x"}) + "\n")
    with pytest.raises(ValueError, match="'prefix' and 'oracle'"):
        load_tfv1real(bad)
    with pytest.raises(ValueError, match="neither"):
        load_or_build(tmp_path / "missing", None)


def test_plain_jsonl_without_ids(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prefix": "import tensorflow as tf\ntf", "oracle": ".compat.v1.zeros"}) + "\n\n")
    (item,) = load_tfv1real(path)
    assert item.item_id == "line-1"
