import numpy as np

from sample_3 import value_range


def test_range():
    assert value_range(np.array([3, 9, 4])) == 6


def test_negative():
    assert value_range(np.array([-5.0, 5.0])) == 10.0
