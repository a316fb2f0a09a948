"""Curve fitting and resampling for a lab notebook (NumPy 1 code)."""

import numpy as np


class Measurements:
    """Repeated measurements of one quantity against a control variable."""

    def __init__(self, x, y):
        self.x = np.asarray(x, dtype=float)
        self.y = np.asarray(y, dtype=float)

    def span(self) -> float:
        return self.x.ptp()

    def fit(self, degree: int = 2) -> np.ndarray:
        return np.polyfit(self.x, self.y, degree)

    def residuals(self, degree: int = 2) -> np.ndarray:
        coefficients = self.fit(degree)
        return self.y - np.polyval(coefficients, self.x)

    def area(self) -> float:
        return float(np.trapz(self.y, self.x))

    def area_new(self) -> float:
        return float(np.trapezoid(self.y, self.x))


def make_data(seed: int = 11) -> Measurements:
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 10.0, 40)
    y = 0.5 * x**2 - 2.0 * x + 1.0 + rng.normal(0.0, 0.8, x.size)
    return Measurements(x, y)


def bootstrap(m: Measurements, rounds: int = 50) -> np.ndarray:
    rng = np.random.RandomState(5)
    slopes = np.empty(rounds)
    for i in range(rounds):
        pick = rng.randint(0, m.x.size, m.x.size)
        slopes[i] = np.polyfit(m.x[pick], m.y[pick], 1)[0]
    return slopes


def interval(samples: np.ndarray) -> np.ndarray:
    return np.quantile(samples, [0.05, 0.95], interpolation="linear")


def interval_new(samples: np.ndarray) -> np.ndarray:
    return np.quantile(samples, [0.05, 0.95], method="linear")


def joint_counts(m: Measurements) -> np.ndarray:
    counts, _ = np.histogramdd(np.column_stack([m.x, m.y]), bins=4, normed=True)
    return counts


def grid(m: Measurements) -> np.ndarray:
    return np.row_stack([m.x, m.y])


def lag_correlation(m: Measurements) -> np.ndarray:
    centred = m.y - m.y.mean()
    return np.correlate(centred, centred, mode="full")


def ranks(values: np.ndarray) -> np.ndarray:
    order = values.argsort()
    out = np.empty_like(order)
    out[order] = np.arange(values.size)
    return out


def main() -> None:
    m = make_data()
    print("span:", m.span())
    print("fit:", m.fit().round(3))
    print("rms residual:", np.sqrt(np.mean(m.residuals() ** 2)).round(3))
    print("area:", m.area())
    print("area (trapezoid):", round(m.area_new(), 3))
    slopes = bootstrap(m)
    print("slope interval:", interval(slopes))
    print("slope interval (method):", interval_new(slopes).round(3))
    print("joint counts:", joint_counts(m))
    print("grid:", grid(m).shape)
    print("lag correlation peak:", lag_correlation(m).argmax())
    print("ranks:", ranks(m.y)[:5])
    print("range via function:", np.ptp(m.y).round(3))
    print("cumulative product:", np.cumprod([1.0, 1.1, 1.2]).round(3))


if __name__ == "__main__":
    main()
