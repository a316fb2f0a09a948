import numpy as np

angles = np.linspace(0, np.pi, 5)
values = np.
