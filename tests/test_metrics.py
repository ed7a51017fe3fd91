import numpy as np
import pytest

from dpcl.metrics import (
    accuracy_matrix,
    average_accuracy,
    average_forgetting,
    forgetting,
    worst_case_forgetting,
)

NAN = np.nan
# Hand-computed example: 3 tasks.
ACC = np.array(
    [
        [0.90, NAN, NAN],
        [0.70, 0.80, NAN],
        [0.60, 0.85, 0.50],
    ]
)


def test_average_accuracy_by_hand():
    # AA_1 = .9, AA_2 = (.7 + .8)/2 = .75, AA_3 = (.6 + .85 + .5)/3 = .65
    assert average_accuracy(ACC) == pytest.approx([0.90, 0.75, 0.65])


def test_forgetting_by_hand():
    f = forgetting(ACC)
    # f_{2,1} = .9 - .7 = .2 ; f_{3,1} = max(.9, .7) - .6 = .3 ; f_{3,2} = .8 - .85 = -.05
    assert f[1, 0] == pytest.approx(0.2)
    assert f[2, 0] == pytest.approx(0.3)
    assert f[2, 1] == pytest.approx(-0.05)
    assert np.isnan(f[0, 0]) and np.isnan(f[2, 2])
    af = average_forgetting(ACC)
    assert np.isnan(af[0])
    assert af[1:] == pytest.approx([0.2, (0.3 - 0.05) / 2])
    wf = worst_case_forgetting(ACC)  # max over the earlier tasks: .2, then max(.3, -.05)
    assert np.isnan(wf[0]) and wf[1:] == pytest.approx([0.2, 0.3])


def test_forgetting_uses_only_earlier_rows():
    # Task 1's accuracy rises later: forgetting compares against rows k < t only, so it
    # is negative, not clipped to zero and not taken against the maximum over all rows.
    acc = np.array([[0.5, NAN], [0.9, 0.7]])
    assert forgetting(acc)[1, 0] == pytest.approx(-0.4)


def test_accuracy_matrix_from_predictions():
    targets = [np.array([0, 0, 1, 1]), np.array([2, 3])]
    preds = [[np.array([0, 0, 1, 0])], [np.array([0, 1, 1, 1]), np.array([2, 2])]]
    acc = accuracy_matrix(preds, targets)
    assert acc[0, 0] == 0.75 and acc[1, 0] == 0.75 and acc[1, 1] == 0.5 and np.isnan(acc[0, 1])


def test_tasks_without_test_classes_are_skipped():
    # task 2 introduced no new class (blurry split): its column is undefined
    acc = np.array([[0.8, NAN, NAN], [0.6, NAN, NAN], [0.7, NAN, 0.9]])
    assert average_accuracy(acc) == pytest.approx([0.8, 0.6, 0.8])
    af = average_forgetting(acc)
    assert af[1] == pytest.approx(0.2) and af[2] == pytest.approx(0.1)
