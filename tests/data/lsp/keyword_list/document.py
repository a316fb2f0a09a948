import numpy as np
counts, edges = np.histogram(values, 