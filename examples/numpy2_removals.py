# NumPy 2 removed many aliases (np.float_, np.product, np.alltrue, np.in1d, ...).
# With numpy 2 installed, completions here only name functions that still exist.
import numpy as np

values = np.arange(12).reshape(3, 4)
total = np.