"""Daily report over a week of temperature readings from a few sensors (NumPy 1 code)."""

import numpy as np

SENSORS = ("roof", "hall", "cellar")
MISSING = np.NaN
LIMIT = np.Inf


def readings(seed: int = 7) -> np.ndarray:
    """Hourly readings, one row per sensor, with a few dropped samples."""
    rng = np.random.RandomState(seed)
    hours = np.arange(7 * 24)
    base = 12.0 + 6.0 * np.sin(hours / 24.0 * 2 * np.pi)
    data = base + rng.normal(0.0, 1.5, size=(len(SENSORS), hours.size))
    data[rng.rand(*data.shape) < 0.02] = np.nan
    return data


def spread(values: np.ndarray) -> float:
    clean = values[~np.isnan(values)]
    return float(clean.ptp())


def daily_energy(values: np.ndarray) -> np.ndarray:
    days = np.nan_to_num(values).reshape(7, 24)
    return np.trapz(days, dx=1.0, axis=1)


def density_peak(values: np.ndarray) -> float:
    density, edges = np.histogram(values, bins=12, normed=True)
    return float(edges[np.argmax(density)])


def summary(data: np.ndarray) -> dict:
    filled = np.where(np.isnan(data), np.nanmean(data), data)
    stats = {}
    stats["mean"] = filled.mean(axis=1).astype(np.float_)
    stats["mean64"] = filled.mean(axis=1).astype(np.float64)
    stats["spread"] = [spread(row) for row in data]
    stats["range"] = np.ptp(filled, axis=1)
    stats["p90"] = np.percentile(filled, 90, axis=1, interpolation="nearest")
    stats["p50"] = np.percentile(filled, 50, axis=1, method="nearest")
    stats["rounded"] = np.round_(filled.mean(), 2)
    stats["all_positive"] = np.alltrue(filled > -40.0)
    stats["any_frost"] = np.sometrue(filled < 0.0)
    stats["growth"] = np.product(1.0 + np.diff(filled[0, :5]) / 100.0)
    stats["compound"] = np.cumproduct(np.full(4, 1.01))
    stats["density_peak"] = density_peak(filled[0])
    stats["energy"] = daily_energy(data[1])
    stats["bounded"] = bool(np.all(filled < np.inf))
    return stats


def flagged(watch: list) -> np.ndarray:
    codes = np.arange(len(SENSORS))
    return np.in1d(codes, watch)


def main() -> None:
    data = readings()
    report = summary(data)
    for name in sorted(report):
        print(f"{name:>14}: {report[name]}")
    print("flagged:", flagged([0, 2]))


if __name__ == "__main__":
    main()
