import numpy as np
x = np.