import numpy as np

from sample_5 import stable_sort


def test_sorted():
    assert list(stable_sort(np.array([3, 1, 2, 1]))) == [1, 1, 2, 3]
