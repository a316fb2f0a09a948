import numpy as np

x = np.float_(3)
h = np.histogram([1, 2], normed=True)
try:
    from numpy import float_
except ImportError:
    float_ = float
