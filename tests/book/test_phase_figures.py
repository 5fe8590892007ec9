"""Tests of ``tokendynamics.book.phase_figures``: the runs of a setting of the phase-diagram chapter and the
transition curve of the published protocol's grid."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics.book import phase_figures as pf
from tokendynamics.book.experiments import settings


def test_phase_points_give_kind_clouds_to_the_fixed_layer_runs_of_that_kind_only():
    """A kind's own number of clouds applies to its maps, finer grids and recipes; the runs with layers redrawn
    along the depth, the other kinds and the runs that set their own number keep theirs."""
    p = settings("phase_diagrams", "full")
    p["kind_clouds"] = {"softmax": 40}
    runs = {q["label"]: q for q in pf.phase_points(p)}
    for label in ("softmax/identity", "softmax/identity/fine", "softmax/gaussian", "softmax/minus_identity"):
        assert runs[label]["clouds"] == 40
    for label in ("softmax/gaussian/every1", "l2/identity", "linear/identity", "sinkhorn/identity"):
        assert runs[label]["clouds"] == p["clouds"]
    assert runs["check/softmax"]["clouds"] == p["step_check"]["clouds"]
    assert runs["softmax/identity/n8"]["clouds"] == p["count_clouds"]
    p["kind_clouds"] = {"softmaxx": 40}
    with pytest.raises(ValueError, match="softmaxx"):
        pf.phase_points(p)


def test_glpr_transition_interpolates_the_half_crossing_in_beta_at_each_time():
    """beta*(t) is where the probability of one cluster crosses 1/2 along beta (linear interpolation), NaN where
    it does not cross."""
    G = {
        "betas": np.array([1.0, 2.0, 3.0]),
        "single": np.array([[0, 0, 0], [10, 6, 2], [10, 10, 0]]),
        "clouds": np.array(10),
    }
    star = pf.glpr_transition(G)
    assert np.isnan(star[0])
    assert star[1] == pytest.approx(2.25) and star[2] == pytest.approx(2.5)
