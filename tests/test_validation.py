"""Tests of ``tokendynamics.validation``: argument checks that name what is wrong."""

from __future__ import annotations

import numpy as np
import pytest


def test_validate_gaussian_names_what_is_wrong():
    from tokendynamics.validation import validate_gaussian

    m, S = validate_gaussian(0.5, 2.0)
    assert m.shape == (1,) and S.shape == (1, 1) and S[0, 0] == 2.0
    with pytest.raises(ValueError, match="mean has dimension 2 but the layer has d = 3"):
        validate_gaussian([0, 0], np.eye(2), 3, what="the layer has d")
    with pytest.raises(ValueError, match="mean contains non-finite"):
        validate_gaussian([np.nan, 0], np.eye(2))
    with pytest.raises(ValueError, match="S2 must be positive semi-definite"):
        validate_gaussian([0, 0], np.diag([1.0, -1.0]), name="S2")
    with pytest.raises(ValueError, match="cov must be 2 x 2"):
        validate_gaussian([0, 0], np.eye(3))
