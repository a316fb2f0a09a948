# A small analysis script written against NumPy 1.x: it summarises a day of temperature
# readings from a few sensors. NumPy 2 removed many of the names it uses (np.float_,
# np.product, np.in1d, ndarray.ptp, histogram's normed=, np.trapz, np.NaN, ...);
# `adaptrack-lsp check --suggest examples/numpy1_habits.py` lists them with rewrites.
import numpy as np

rng = np.random.default_rng(7)
hours = np.arange(24, dtype=np.float_)
daily = 20.0 + 5.0 * np.sin(hours / 24.0 * 2.0 * np.pi)
readings = np.stack([daily + rng.normal(0.0, 0.5, size=24) for sensor in range(3)])

# which sensors report in the range the calibration covers
calibrated = np.array([0, 2])
sensor_ids = np.arange(readings.shape[0])
is_calibrated = np.in1d(sensor_ids, calibrated)

# spread and scale of each sensor's day
spread = readings.ptp(axis=1)
gain = np.product(readings.max(axis=1) / readings.min(axis=1))
running_gain = np.cumproduct(readings[0] / readings[0, 0])

# a density histogram of all readings
counts, edges = np.histogram(readings, bins=12, normed=True)

# degree-hours above 20 degrees, per sensor
excess = np.clip(readings - 20.0, 0.0, None)
degree_hours = np.trapz(excess, hours, axis=1)

# sanity checks; readings below -50 are logger faults
limit = np.float_(30.0)
all_positive = np.alltrue(readings > 0)
any_hot = np.sometrue(readings > limit)
cleaned = np.where(readings < -50.0, np.NaN, readings)

# the raw bytes as the logger on a big-endian machine writes them
swapped = readings.newbyteorder()

# one table: hours on top, one row per sensor
table = np.row_stack([hours, readings])
total = np.nansum(cleaned, axis=1)
print(is_calibrated, spread, gain, running_gain[-1], counts.sum(), degree_hours, all_positive, any_hot, swapped.dtype, total)
