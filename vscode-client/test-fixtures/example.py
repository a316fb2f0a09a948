import numpy as np

values = np.
