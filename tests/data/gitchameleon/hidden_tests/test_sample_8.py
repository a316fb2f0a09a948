import numpy as np

from sample_8 import running_product


def test_running_product():
    assert list(running_product([1, 2, 3, 4])) == [1, 2, 6, 24]
