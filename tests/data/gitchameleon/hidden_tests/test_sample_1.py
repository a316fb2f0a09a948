import numpy as np

from sample_1 import total_product


def test_product():
    assert total_product([1, 2, 3, 4]) == 24


def test_empty_product_is_one():
    assert total_product([]) == 1
