# Code written for NumPy 1 uses aliases that NumPy 2 removed (np.product, np.alltrue, np.float_).
# With numpy 2 installed, a constrained completion names only functions that still exist.
import numpy as np

weights = np.array([0.5, 1.5, 2.0], dtype=np.float_)
all_positive = np.alltrue(weights > 0)
volume = np.product(weights)
total = np.