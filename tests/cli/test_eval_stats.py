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
