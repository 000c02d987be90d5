"""Agreement figures against values computed by hand."""

from __future__ import annotations

import pytest

from replyguard.evaluation import stats
from replyguard.evaluation.stats import Categorised, Confusion, confusion

# Ten labelled records, (label, judged):
#   1-4  PASS PASS
#   5    PASS FAIL   (a false FAIL)
#   6-8  FAIL FAIL
#   9-10 FAIL PASS   (two false PASSes)
TEN = [("PASS", "PASS")] * 4 + [("PASS", "FAIL")] + [("FAIL", "FAIL")] * 3 + [("FAIL", "PASS")] * 2

# Confusion matrix, written out:
#                 judged PASS  judged FAIL
#   labelled PASS      4            1        (5 labelled PASS)
#   labelled FAIL      2            3        (5 labelled FAIL)
# po = (4 + 3) / 10 = 0.7
# labels PASS 5/10 = 0.5, judge PASS (4 + 2)/10 = 0.6
# pe = 0.5 * 0.6 + 0.5 * 0.4 = 0.30 + 0.20 = 0.5
# kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
# falseFailRate = 1 / 5 = 0.2; falsePassRate = 2 / 5 = 0.4


def test_the_confusion_matrix_of_the_ten_records() -> None:
    assert confusion(TEN) == Confusion(pass_pass=4, pass_fail=1, fail_pass=2, fail_fail=3)


def test_figures_of_the_ten_records_match_the_hand_computation() -> None:
    matrix = confusion(TEN)
    assert stats.accuracy(matrix) == pytest.approx(0.7)
    assert stats.kappa(matrix) == pytest.approx(0.4)
    assert stats.false_fail_rate(matrix) == pytest.approx(0.2)
    assert stats.false_pass_rate(matrix) == pytest.approx(0.4)


def test_kappa_of_an_unbalanced_set_by_hand() -> None:
    # PP 6, PF 2, FP 1, FF 1 (n = 10): po = 0.7; labels PASS 0.8, judge PASS 0.7;
    # pe = 0.8 * 0.7 + 0.2 * 0.3 = 0.56 + 0.06 = 0.62; kappa = 0.08 / 0.38 = 0.210526...
    matrix = Confusion(pass_pass=6, pass_fail=2, fail_pass=1, fail_fail=1)
    assert stats.kappa(matrix) == pytest.approx(0.08 / 0.38)
    assert stats.kappa(matrix) == pytest.approx(0.2105263)


def test_no_labelled_record_gives_no_figures() -> None:
    matrix = confusion([])
    assert (stats.accuracy(matrix), stats.kappa(matrix)) == (None, None)
    assert (stats.false_fail_rate(matrix), stats.false_pass_rate(matrix)) == (None, None)


def test_kappa_is_undefined_without_variance_while_accuracy_is_one() -> None:
    matrix = confusion([("PASS", "PASS")] * 5)
    assert stats.accuracy(matrix) == 1.0
    assert stats.kappa(matrix) is None
    assert stats.false_fail_rate(matrix) == 0.0
    assert stats.false_pass_rate(matrix) is None  # no labelled FAIL


def test_kappa_of_constant_opposite_answers_is_zero() -> None:
    # Labels all PASS, judge all FAIL: po = 0, pe = 1 * 0 + 0 * 1 = 0, kappa = 0.
    matrix = confusion([("PASS", "FAIL")] * 3)
    assert (stats.accuracy(matrix), stats.kappa(matrix), stats.false_fail_rate(matrix)) == (
        0.0,
        0.0,
        1.0,
    )


def test_perfect_agreement_with_both_answers_has_kappa_one() -> None:
    assert stats.kappa(confusion([("PASS", "PASS"), ("FAIL", "FAIL")])) == 1.0


def test_categories_count_judged_labelled_and_agreed_per_record() -> None:
    rows = [
        Categorised(judged="incomplete", labelled="incomplete"),
        Categorised(judged="goal_missed", labelled="incomplete"),
        Categorised(judged=None, labelled="refusal"),
        Categorised(judged="uncategorised", labelled=None),
        Categorised(judged=None, labelled=None),
    ]
    assert stats.by_category(rows) == {
        "goal_missed": {"judged": 1, "labelled": 0, "agreed": 0},
        "incomplete": {"judged": 1, "labelled": 2, "agreed": 1},
        "refusal": {"judged": 0, "labelled": 1, "agreed": 0},
        "uncategorised": {"judged": 1, "labelled": 0, "agreed": 0},
    }


# -- 95 % intervals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),  # the textbook case
        (81, 263, 0.2553, 0.3662),  # Newcombe (1998), Table I
        (15, 148, 0.0624, 0.1605),  # Newcombe (1998), Table I
        (0, 10, 0.0, 0.2775),  # not empty at no success
        (10, 10, 0.7225, 1.0),  # nor at all of them
    ],
)
def test_wilson_intervals_match_published_values(
    successes: int, n: int, low: float, high: float
) -> None:
    interval = stats.wilson(successes, n)
    assert interval is not None
    assert (interval.low, interval.high, interval.n) == (
        pytest.approx(low, abs=5e-5),
        pytest.approx(high, abs=5e-5),
        n,
    )


def test_wilson_at_the_bounds_is_exactly_zero_or_one_and_none_without_labels() -> None:
    none, all_of_them = stats.wilson(0, 3), stats.wilson(3, 3)
    assert none is not None and none.low == 0.0
    assert all_of_them is not None and all_of_them.high == 1.0
    assert stats.wilson(0, 0) is None


def test_the_half_width_is_half_the_interval() -> None:
    interval = stats.wilson(22, 24)
    assert interval is not None
    half = (interval.high - interval.low) / 2
    assert stats.wilson_half_width(22 / 24, 24) == pytest.approx(half)


@pytest.mark.parametrize(
    ("rate", "n", "more"),
    [
        # At a rate of 1 the half-width is z^2 / (2N + 2z^2): at most 0.05 from
        # N >= 9 z^2 = 34.57, so N = 35, 25 more than 10.
        (1.0, 10, 25),
        # At 0.5 (the widest) Wilson needs N = 381 (the normal approximation says 385).
        (0.5, 0, 381),
        (0.5, 400, 0),  # already narrower than +-5 points
    ],
)
def test_labels_for_five_points_by_hand(rate: float, n: int, more: int) -> None:
    assert stats.labels_for_half_width(rate, n) == more


@pytest.mark.parametrize(("rate", "n"), [(22 / 24, 24), (0.7, 10), (0.1, 30), (0.95, 2)])
def test_labels_for_five_points_is_the_least_n_that_gets_there(rate: float, n: int) -> None:
    total = n + stats.labels_for_half_width(rate, n)
    assert stats.wilson_half_width(rate, total) <= 0.05 < stats.wilson_half_width(rate, total - 1)


def test_the_kappa_interval_is_deterministic_and_holds_kappa() -> None:
    matrix = Confusion(pass_pass=11, pass_fail=1, fail_pass=1, fail_fail=11)
    interval = stats.kappa_interval(matrix)
    assert interval is not None and interval == stats.kappa_interval(matrix)
    kappa = stats.kappa(matrix)
    assert kappa is not None
    assert -1 <= interval.low < kappa <= interval.high <= 1
    assert interval.n == 24


def test_the_kappa_interval_narrows_with_more_labels_and_matches_the_normal_approximation() -> None:
    # PP 400, PF 50, FP 60, FF 490 (n = 1000): po = 0.89; labels PASS 0.45, judge PASS 0.46;
    # pe = 0.45 * 0.46 + 0.55 * 0.54 = 0.504; kappa = 0.386 / 0.496 = 0.7782.
    # Cohen's large-sample standard error sqrt(po (1 - po) / n) / (1 - pe) = 0.01995:
    # kappa +- 1.96 SE = [0.739, 0.817]. The bootstrap agrees to within 0.005.
    matrix = Confusion(pass_pass=400, pass_fail=50, fail_pass=60, fail_fail=490)
    interval = stats.kappa_interval(matrix)
    assert interval is not None
    assert (interval.low, interval.high) == (
        pytest.approx(0.739, abs=0.005),
        pytest.approx(0.817, abs=0.005),
    )
    small = stats.kappa_interval(Confusion(pass_pass=40, pass_fail=5, fail_pass=6, fail_fail=49))
    assert small is not None and small.high - small.low > 2 * (interval.high - interval.low)


def test_the_kappa_interval_is_none_where_kappa_is_undefined() -> None:
    assert stats.kappa_interval(confusion([("PASS", "PASS")] * 5)) is None
    assert stats.kappa_interval(confusion([])) is None


def test_the_kappa_interval_is_none_when_no_resample_has_variance() -> None:
    # Two records, one PP and one FF: a resample of both from one cell has no kappa. With a
    # single resample, about half the seeds draw such a one, and then there is no interval.
    matrix = Confusion(pass_pass=1, fail_fail=1)
    found = [stats.kappa_interval(matrix, resamples=1, seed=seed) for seed in range(20)]
    assert None in found and any(interval is not None for interval in found)
