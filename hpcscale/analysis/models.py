"""Models for extrapolating beyond the node counts that were measured.

Amdahl (strong scaling): T(N) = T1 * (s + (1 - s) / N). Gustafson (weak scaling): throughput
X(N) = X1 * (s + (1 - s) * N), i.e. scaled speedup N - s * (N - 1). Both are linear in two
coefficients (a + b/N and a + b*N, with s = a / (a + b)), so they are fitted by weighted least
squares; with `relative=True` the weights are 1/y^2 because timing noise grows with the time.
Uncertainty: the coefficient covariance gives the serial fraction's standard error (delta method)
and a Student-t prediction interval for a new measurement at N. With only two distinct points
there are no residual degrees of freedom and the band is NaN: the fit is exact, not certain.

Communication cost (seed 003): per step, a ring all-reduce sends 2 M (P - 1) / P bytes per
process and a parameter server moves 2 M (P - 1) bytes through its own link, for a model of M
bytes (parameter count * bytes per element) and P processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Law = Literal["amdahl", "gustafson"]
N_PARAMS = 2  # both laws: a base (T1 or X1) and a serial fraction


@dataclass(frozen=True)
class Band:
    """A prediction with its interval (same shapes); always a prediction, never a measurement."""

    n: np.ndarray
    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    kind: str = "prediction"


@dataclass(frozen=True)
class LawFit:
    """A fitted Amdahl or Gustafson law. `base` is T1 (Amdahl, s) or X1 (Gustafson, images/s)
    at one unit of the axis; `serial_fraction_se` is NaN when dof == 0."""

    law: Law
    base: float
    serial_fraction: float
    serial_fraction_se: float
    dof: int
    n_points: int
    relative: bool
    coef: np.ndarray
    cov: np.ndarray
    sigma2: float

    def value(self, n: npt.ArrayLike) -> np.ndarray:
        """Fitted epoch time (Amdahl) or throughput (Gustafson) at n."""
        return _design(self.law, n) @ self.coef

    def speedup(self, n: npt.ArrayLike) -> np.ndarray:
        """Amdahl: T1 / T(n); Gustafson: scaled speedup X(n) / X1."""
        v = self.value(n)
        return self.base / v if self.law == "amdahl" else v / self.base

    def predict(self, n: npt.ArrayLike, level: float = 0.95) -> Band:
        """Value at n with a `level` prediction interval for one new measurement there."""
        x0 = _design(self.law, n)
        value = x0 @ self.coef
        var_mean = np.einsum("ij,jk,ik->i", x0, self.cov, x0)
        noise = self.sigma2 * (value**2 if self.relative else 1.0)
        if self.dof > 0:
            from scipy import stats  # heavy import: only when a band is asked for

            half = stats.t.ppf(0.5 + level / 2.0, self.dof) * np.sqrt(var_mean + noise)
        else:
            half = np.full_like(value, np.nan)
        n_arr = np.atleast_1d(np.asarray(n, dtype=float))
        return Band(n_arr, value, value - half, value + half, level)


def fit_problem(fit: LawFit) -> str | None:
    """Why this fit must not predict, or None: fewer points than parameters + 1 (an exact fit
    says nothing about the law), or parameters outside their physical range (a base <= 0, a
    serial fraction outside 0..1: the data scale super-linearly or slow down with scale)."""
    if fit.n_points < N_PARAMS + 1:
        return (
            f"{fit.n_points} measurement(s) for a {N_PARAMS}-parameter law: at least "
            f"{N_PARAMS + 1} are needed (more sizes or repeats)"
        )
    if not np.isfinite(fit.base) or fit.base <= 0:
        return f"the fitted base value {fit.base:.3g} is not positive"
    if not 0.0 <= fit.serial_fraction <= 1.0:
        return (
            f"the fitted serial fraction {fit.serial_fraction:.3g} lies outside 0..1 "
            "(the measurements scale super-linearly or slow down with scale)"
        )
    return None


def fit_amdahl(n: npt.ArrayLike, time_s: npt.ArrayLike, relative: bool = True) -> LawFit:
    """Fit T(N) = a + b / N to strong-scaling times (repeats welcome: they add dof)."""
    return _fit("amdahl", n, time_s, relative)


def fit_gustafson(n: npt.ArrayLike, throughput: npt.ArrayLike, relative: bool = True) -> LawFit:
    """Fit X(N) = a + b * N to weak-scaling throughputs."""
    return _fit("gustafson", n, throughput, relative)


def amdahl_speedup(serial_fraction: float, n: npt.ArrayLike) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / n)


def gustafson_speedup(serial_fraction: float, n: npt.ArrayLike) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    return n - serial_fraction * (n - 1.0)


def karp_flatt(speedup: npt.ArrayLike, n: npt.ArrayLike) -> np.ndarray:
    """Experimentally determined serial fraction e = (1/psi - 1/p) / (1 - 1/p); NaN at p = 1.
    Constant e means Amdahl explains the loss; e growing with p means overhead grows with p."""
    psi = np.asarray(speedup, dtype=float)
    p = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (1.0 / psi - 1.0 / p) / (1.0 - 1.0 / p)
    return np.where(p == 1.0, np.nan, e)


def ring_allreduce_bytes(
    param_count: npt.ArrayLike, ranks: npt.ArrayLike, bytes_per_param: float = 4.0
) -> np.ndarray:
    """Bytes each process sends per step in a ring all-reduce: 2 M (P - 1) / P."""
    m = np.asarray(param_count, dtype=float) * bytes_per_param
    p = np.asarray(ranks, dtype=float)
    return 2.0 * m * (p - 1.0) / p


def parameter_server_bytes(
    param_count: npt.ArrayLike, ranks: npt.ArrayLike, bytes_per_param: float = 4.0
) -> np.ndarray:
    """Bytes through a single parameter server per step: 2 M (P - 1) (in and back out)."""
    m = np.asarray(param_count, dtype=float) * bytes_per_param
    return 2.0 * m * (np.asarray(ranks, dtype=float) - 1.0)


def transfer_time_s(nbytes: npt.ArrayLike, bandwidth_gbs: npt.ArrayLike) -> np.ndarray:
    """Seconds to move nbytes at bandwidth_gbs (1e9 bytes/s); with the trace's bus bandwidth
    (NCCL-tests convention, algbw * 2(P-1)/P) the ring time is ring bytes / bus bandwidth."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(nbytes, dtype=float) / (np.asarray(bandwidth_gbs, dtype=float) * 1e9)


def _design(law: Law, n: npt.ArrayLike) -> np.ndarray:
    n = np.atleast_1d(np.asarray(n, dtype=float))
    return np.column_stack([np.ones_like(n), 1.0 / n if law == "amdahl" else n])


def _fit(law: Law, n: npt.ArrayLike, y: npt.ArrayLike, relative: bool) -> LawFit:
    n_arr = np.atleast_1d(np.asarray(n, dtype=float))
    y_arr = np.atleast_1d(np.asarray(y, dtype=float))
    ok = np.isfinite(n_arr) & np.isfinite(y_arr)
    n_arr, y_arr = n_arr[ok], y_arr[ok]
    if np.unique(n_arr).size < 2:
        raise ValueError(f"{law} fit needs measurements at two or more distinct sizes")
    if (n_arr <= 0).any() or (y_arr <= 0).any():
        raise ValueError(f"{law} fit needs positive sizes and values")
    x = _design(law, n_arr)
    w = 1.0 / y_arr**2 if relative else np.ones_like(y_arr)
    xtw = x.T * w
    inv = np.linalg.inv(xtw @ x)
    coef = inv @ (xtw @ y_arr)
    resid = y_arr - x @ coef
    dof = y_arr.size - 2
    sigma2 = float(np.sum(w * resid**2) / dof) if dof > 0 else np.nan
    cov = sigma2 * inv if dof > 0 else np.full((2, 2), np.nan)
    a, b = coef
    total = a + b
    grad = np.array([b, -a]) / total**2
    se = float(np.sqrt(grad @ cov @ grad)) if dof > 0 else np.nan
    return LawFit(
        law=law,
        base=float(total),
        serial_fraction=float(a / total),
        serial_fraction_se=se,
        dof=dof,
        n_points=int(y_arr.size),
        relative=relative,
        coef=coef,
        cov=cov,
        sigma2=sigma2 if dof > 0 else np.nan,
    )
