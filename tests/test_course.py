"""rk.course: the equality check between a notebook's written-out core and the package, and the
exercise checker."""
import numpy as np
import pytest
import torch

from robustkit import course


def test_same_accepts_equal_values_of_any_shape_and_counts_them():
    agreement = course.same({"a": [1.0, 2.0], "b": "x"}, {"a": np.array([1.0, 2.0]), "b": "x"}, what="t")
    assert (agreement.values, agreement.largest_difference) == (3, 0.0)
    assert repr(agreement) == "✓ t: the written-out version equals the package's (3 values)"
    assert course.same(torch.tensor([0.5, 0.25]), [0.5, 0.25], what="tensor").values == 2


def test_same_names_the_first_difference():
    with pytest.raises(AssertionError, match=r"s\[1\]: yours is 0.5, the package's 0.25"):
        course.same([1.0, 0.5], [1.0, 0.25], what="s")
    with pytest.raises(AssertionError, match="yours has 2 values, the package's 3"):
        course.same([1, 2], [1, 2, 3], what="s")
    with pytest.raises(AssertionError, match=r"only in yours \['b'\]"):
        course.same({"a": 1, "b": 2}, {"a": 1}, what="d")
    with pytest.raises(AssertionError, match="yours is 'KEEP', the package's 'REVISE'"):
        course.same("KEEP", "REVISE", what="decision")


def test_same_tolerance_is_absolute_and_reported():
    agreement = course.same([1.0, 2.0], [1.0, 2.0 + 1e-7], what="f", atol=1e-6)
    assert agreement.largest_difference == pytest.approx(1e-7)
    assert "largest difference 1.0e-07" in repr(agreement)
    with pytest.raises(AssertionError, match="allowed 1e-08"):
        course.same([2.0], [2.0 + 1e-7], what="f", atol=1e-8)
    with pytest.raises(ValueError):
        course.same(1, 1, what="f", atol=-1)


def test_same_treats_nan_as_equal_only_to_nan_and_bools_exactly():
    assert course.same([float("nan")], [np.nan], what="n").values == 1
    with pytest.raises(AssertionError):
        course.same([float("nan")], [0.0], what="n", atol=1.0)
    with pytest.raises(AssertionError):
        course.same(True, 1.0, what="b")


def test_check_says_right_wrong_or_no_guess():
    assert course.check(None, "falls", choices=("rises", "falls"), hint="h").right is None
    right = course.check(" Falls", "falls", choices=("rises", "falls"), hint="h")
    assert right.right and repr(right) == "✓ right: 'falls'"
    wrong = course.check("rises", "falls", choices=("rises", "falls"), hint="read the τ = 0 end")
    assert wrong.right is False and "Hint: read the τ = 0 end" in repr(wrong)
    assert course.check("up", "falls", choices=("rises", "falls"), hint="h").right is False
    assert course.check(41, 40, tolerance=1, hint="h").right
    assert not course.check(42, 40, tolerance=1, hint="h").right
    assert course.check("bm25", "bm25", hint="h").right
    with pytest.raises(ValueError, match="not one of the choices"):
        course.check("rises", "flat", choices=("rises", "falls"), hint="h")
