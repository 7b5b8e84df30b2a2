"""The harness-overhead benches' estimator (bench/overhead_stats.py): per-run median epoch after
warm-up, median of per-pair ratios, the order-statistic CI of that median, the alternating order
and the loss/verdict. Expected values worked out by hand in the comments."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "overhead_stats.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("overhead_stats", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["overhead_stats"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


S = _load()


def test_median_odd_and_even() -> None:
    assert S.median([3.0, 1.0, 2.0]) == 2.0
    assert S.median([4.0, 1.0, 3.0, 2.0]) == 2.5  # (2 + 3) / 2
    with pytest.raises(ValueError):
        S.median([])


def test_run_figure_drops_the_warm_up_epochs() -> None:
    # epochs 100 (warm-up), 10, 30, 20 -> median of 10, 30, 20 = 20; with the warm-up kept it
    # would be (20 + 30) / 2 = 25
    assert S.run_figure([100.0, 10.0, 30.0, 20.0], warmup=1) == 20.0
    assert S.run_figure([100.0, 10.0, 30.0, 20.0], warmup=2) == 25.0  # 30, 20
    with pytest.raises(ValueError, match="nothing measured"):
        S.run_figure([1.0], warmup=1)


def test_binomial_cdf_by_hand() -> None:
    assert S.binom_half_cdf(0, 1) == 0.5
    assert S.binom_half_cdf(1, 10) == 11 / 1024  # C(10,0) + C(10,1) = 1 + 10
    assert S.binom_half_cdf(2, 12) == 79 / 4096  # 1 + 12 + 66


@pytest.mark.parametrize(
    ("n", "ranks", "coverage"),
    [
        # n=10: k=2 covers 1 - 2*11/1024 = 0.978515625; k=3 only 1 - 2*56/1024 = 0.890625
        (10, (2, 9), 1 - 2 * 11 / 1024),
        # n=12: k=3 covers 1 - 2*79/4096; k=4: 1 - 2*299/4096 = 0.854 < 0.95
        (12, (3, 10), 1 - 2 * 79 / 4096),
        # n=6: [min, max] covers 1 - 2/64 = 0.96875; k=2: 1 - 2*7/64 = 0.78
        (6, (1, 6), 1 - 2 / 64),
        # n=5: even [min, max] covers only 1 - 2/32 = 0.9375: reported as such
        (5, (1, 5), 1 - 2 / 32),
        # n=20: P(B<=5) = 21700/2^20 = 0.0207 -> k=6 covers 0.9586; P(B<=6) = 0.0577 -> k=7 not
        (20, (6, 15), 1 - 2 * 21700 / 2**20),
        (1, (1, 1), 0.0),
    ],
)
def test_median_ci_ranks(n: int, ranks: tuple[int, int], coverage: float) -> None:
    lo, hi, cov = S.median_ci_ranks(n, 0.95)
    assert (lo, hi) == ranks
    assert cov == pytest.approx(coverage)


def test_median_ci_picks_the_order_statistics() -> None:
    # 10 ratios; sorted: 0.90 0.95 0.96 0.97 0.98 0.99 1.00 1.01 1.02 1.10
    ratios = [1.00, 0.90, 0.97, 1.10, 0.96, 1.02, 0.99, 0.95, 1.01, 0.98]
    lo, hi, _ = S.median_ci(ratios)
    assert (lo, hi) == (0.95, 1.02)  # x(2), x(9)
    s = S.summarise(ratios)
    assert s.ratio == pytest.approx(0.985)  # (0.98 + 0.99) / 2
    assert (s.ci_low, s.ci_high, s.pairs) == (0.95, 1.02, 10)


def test_order_alternates() -> None:
    group = [("bare", 2), ("harness", 2), ("timeline", 2)]
    assert S.order(group, 0) == group
    assert S.order(group, 1) == [("timeline", 2), ("harness", 2), ("bare", 2)]
    assert S.order(group, 2) == group


def test_paired_runs_back_to_back_and_ratios_per_pair() -> None:
    calls: list[tuple[str, int]] = []
    figures = iter(range(1, 100))

    def measure(kind: str, np: int) -> tuple[list[float], list[float]]:
        calls.append((kind, np))
        f = float(next(figures))
        return [1000.0, f, f], [1000.0, 2 * f, 2 * f]  # warm-up epoch then two of f

    groups = [[("bare", 1), ("harness", 1)], [("bare", 2), ("harness", 2)]]
    runs = S.Paired(groups, 2, measure)
    assert calls == [
        ("bare", 1), ("harness", 1), ("bare", 2), ("harness", 2),  # round 1, as given
        ("harness", 1), ("bare", 1), ("harness", 2), ("bare", 2),  # round 2, reversed
    ]  # fmt: skip
    # figures: bare1 = 1, 6; harness1 = 2, 5; bare2 = 3, 8; harness2 = 4, 7
    assert runs.ratios(("harness", 1), ("bare", 1)) == [2 / 1, 5 / 6]
    assert runs.ratios(("harness", 2), ("bare", 2), per_cpu=True) == [4 / 3, 7 / 8]
    wall, cpu = runs.compare(("harness", 1), ("bare", 1))
    assert wall.ratio == pytest.approx((2 + 5 / 6) / 2)
    assert cpu.ratio == pytest.approx((2 + 5 / 6) / 2)  # CPU figures are 2x both sides


def _summary(ratio: float, lo: float, hi: float) -> object:
    return S.Summary(ratio, lo, hi, 0.98, 10)


def test_lost_takes_the_worst_rank_count_and_its_bounds() -> None:
    # np1: ratio 0.99 CI [0.97, 1.01]; np2: ratio 0.98 CI [0.975, 0.99]
    out = S.lost([_summary(0.99, 0.97, 1.01), _summary(0.98, 0.975, 0.99)], 3.0)
    assert out["max_lost_pct"] == 2.0  # 1 - 0.98
    assert out["max_lost_ci_high_pct"] == 3.0  # 1 - 0.97 (np1's low bound)
    assert out["max_lost_ci_low_pct"] == 1.0  # 1 - 0.99 (np2's high bound)
    assert out["verdict"] == "met"  # 3.0 <= 3


@pytest.mark.parametrize(
    ("summaries", "verdict"),
    [
        ([(0.99, 0.96, 1.01)], "unresolved"),  # loss CI [-1, 4] straddles 3
        ([(0.95, 0.93, 0.96)], "not met"),  # loss CI [4, 7] above 3
        ([(1.0, 0.99, 1.01), (0.95, 0.93, 0.96)], "not met"),  # one count is enough
        ([(1.0, 0.98, 1.02), (1.01, 0.975, 1.03)], "met"),  # worst high bound 2.5
    ],
)
def test_verdict(summaries: list[tuple[float, float, float]], verdict: str) -> None:
    assert S.lost([_summary(*s) for s in summaries], 3.0)["verdict"] == verdict


def test_too_few_pairs_decide_nothing() -> None:
    # 5 pairs: [min, max] covers only 0.9375 < 0.95, so even a CI wholly above 3 % decides nothing
    few = S.Summary(0.95, 0.93, 0.96, 1 - 2 / 32, 5)
    assert S.lost([few], 3.0)["verdict"] == "too few pairs"
    assert S.lost([few], 3.0, level=0.9)["verdict"] == "not met"


def test_fields_name_the_json_keys() -> None:
    wall, cpu = S.Summary(0.98765, 0.9, 1.0, 0.978, 10), S.Summary(0.99, 0.95, 1.01, 0.978, 10)
    assert S.fields("np2_", wall, cpu) == {
        "np2_ratio": 0.9877,
        "np2_ci": [0.9, 1.0],
        "np2_cpu_ratio": 0.99,
        "np2_cpu_ci": [0.95, 1.01],
        "np2_pairs": 10,
        "np2_ci_coverage": 0.978,
    }


def test_crossover_cancels_a_slower_first_run() -> None:
    # rounds alternate the order, and the pair's first run is the slower: ratios 1.1 in the
    # even rounds and 0.9 in the odd ones;
    # ratio = sqrt(1.1 * 0.9) = sqrt(0.99) = 0.994987..., effect = sqrt(1.1 / 0.9) = 1.105541...
    ratio, effect = S.crossover([1.1, 0.9, 1.1, 0.9])
    assert ratio == pytest.approx(0.9949874, abs=1e-7)
    assert effect == pytest.approx(1.1055416, abs=1e-7)
    # no order effect: the crossover is the plain geometric mean, effect 1
    ratio, effect = S.crossover([0.98, 0.98, 0.98])
    assert ratio == pytest.approx(0.98) and effect == pytest.approx(1.0)
    with pytest.raises(ValueError):
        S.crossover([0.97])  # one order only


def test_schedule_interleaved_is_the_old_order_without_settling() -> None:
    groups = [[("bare", 1), ("harness", 1)], [("bare", 2), ("harness", 2)]]
    assert S.schedule(groups, 2) == [
        (("bare", 1), 0), (("harness", 1), 0), (("bare", 2), 0), (("harness", 2), 0),
        (("harness", 1), 1), (("bare", 1), 1), (("harness", 2), 1), (("bare", 2), 1),
    ]  # fmt: skip


def test_schedule_settles_whenever_the_rank_count_changes() -> None:
    groups = [[("bare", 1), ("harness", 1)], [("bare", 2), ("harness", 2)]]
    # interleaved: the rank count changes before every group of every round -> 4 settling runs
    assert S.schedule(groups, 2, settle=1) == [
        (("bare", 1), None), (("bare", 1), 0), (("harness", 1), 0),
        (("bare", 2), None), (("bare", 2), 0), (("harness", 2), 0),
        (("bare", 1), None), (("harness", 1), 1), (("bare", 1), 1),
        (("bare", 2), None), (("harness", 2), 1), (("bare", 2), 1),
    ]  # fmt: skip


def test_schedule_blocked_changes_rank_count_once() -> None:
    groups = [[("bare", 1), ("harness", 1)], [("bare", 2), ("harness", 2)]]
    # blocked: 3 rounds of np1 (orders given, reversed, given), then 3 of np2; one settling
    # run before each block, so 2 settling runs and 12 counted ones
    assert S.schedule(groups, 3, blocked=True, settle=1) == [
        (("bare", 1), None),
        (("bare", 1), 0), (("harness", 1), 0),
        (("harness", 1), 1), (("bare", 1), 1),
        (("bare", 1), 2), (("harness", 1), 2),
        (("bare", 2), None),
        (("bare", 2), 0), (("harness", 2), 0),
        (("harness", 2), 1), (("bare", 2), 1),
        (("bare", 2), 2), (("harness", 2), 2),
    ]  # fmt: skip
    # two settling runs each time, one group only: settling only at the start
    assert S.schedule([[("a", 1), ("b", 1)]], 2, blocked=True, settle=2) == [
        (("a", 1), None), (("a", 1), None),
        (("a", 1), 0), (("b", 1), 0), (("b", 1), 1), (("a", 1), 1),
    ]  # fmt: skip


def test_paired_discards_the_settling_runs() -> None:
    calls: list[tuple[str, int]] = []
    figures = iter(range(1, 100))

    def measure(kind: str, np: int) -> tuple[list[float], list[float]]:
        calls.append((kind, np))
        f = float(next(figures))
        return [1000.0, f, f], [1000.0, 2 * f, 2 * f]

    groups = [[("bare", 1), ("harness", 1)], [("bare", 2), ("harness", 2)]]
    runs = S.Paired(groups, 2, measure, blocked=True, settle=1)
    assert calls == [
        ("bare", 1), ("bare", 1), ("harness", 1), ("harness", 1), ("bare", 1),
        ("bare", 2), ("bare", 2), ("harness", 2), ("harness", 2), ("bare", 2),
    ]  # fmt: skip
    # figures in call order 1..10: settling bare1 = 1 and bare2 = 6 are not counted;
    # bare1 = 2, 5; harness1 = 3, 4; bare2 = 7, 10; harness2 = 8, 9
    assert runs.settled == [(("bare", 1), 1.0), (("bare", 2), 6.0)]
    assert runs.wall[("bare", 1)] == [2.0, 5.0]
    assert runs.ratios(("harness", 1), ("bare", 1)) == [3 / 2, 4 / 5]
    assert runs.ratios(("harness", 2), ("bare", 2), per_cpu=True) == [8 / 7, 9 / 10]
    assert len(runs.run_s) == 10  # every launch timed, settling ones included
