"""Tests of ``tokendynamics.book.gaussian_plots``: cone and disc pictures, the explorer's library call,
the static animation.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tokendynamics import Attention
from tokendynamics.book.gaussian_plots import (
    EXPLORER_KINDS,
    cone_and_disc_figure,
    explorer_grid_paths,
    explorer_layer,
    explorer_trajectories,
    family_animation,
    family_runs,
    trajectory_colors,
)
from tokendynamics.book.studies.gaussian import cone_grid, disc_point


def test_explorer_runs_every_variant_from_sigma0_and_from_a_grid():
    """The explorer's library call (its speed is measured by `make bench`, not here)."""
    A, V = [[-1.0, 0.3], [-0.3, 0.4]], np.eye(2)
    for kind in EXPLORER_KINDS:
        traj, grid = explorer_trajectories(kind, A, V, 0.3, -0.2)
        assert len(grid) > 10 and traj.cov.shape[1:] == (2, 2)
        assert len(explorer_grid_paths(kind, A, V, grid=3)) == 5  # the 3 x 3 grid's points inside the disc


def test_explorer_l2_layer_has_the_same_bilinear_part_as_softmax():
    A = np.array([[0.3, -0.7], [0.2, 0.5]])
    layer = explorer_layer("l2", A, np.eye(2))
    assert np.allclose(2 * layer.Q[0].T @ layer.K[0], A)
    with pytest.raises(ValueError, match="inside the unit disc"):
        explorer_trajectories("softmax", A, np.eye(2), 0.9, 0.9)


def test_cone_and_disc_figure_draws_every_trajectory_and_colours_follow_the_start():
    covs = [np.array([S, 0.5 * S]) for S in cone_grid(4, 4)]
    colors = trajectory_colors(covs, by="start")
    w = np.array([2 * S[0, 0, 1] for S in covs])
    assert np.allclose(colors[np.argmin(w)], plt.get_cmap("viridis")(0.0))
    fig = cone_and_disc_figure({"a": covs, "b": covs[:3]})
    assert len(fig.axes) == 6  # per panel: the cone, the disc, a colour bar
    assert fig.get_size_inches()[0] <= 7.0
    disc_a, disc_b = fig.axes[1], fig.axes[4]  # the normalised discs under the cones of panels a and b
    assert "2c" in fig.axes[2].get_xlabel()
    for ax, panel in ((disc_a, covs), (disc_b, covs[:3])):
        paths = ax.collections[0].get_segments()  # one path per trajectory
        assert len(paths) == len(panel)
        for seg, S in zip(paths, panel):
            np.testing.assert_allclose(seg, disc_point(S), atol=1e-12)
        ends = ax.collections[1].get_offsets()  # a dot at the end of each path
        np.testing.assert_allclose(ends, [disc_point(S[-1]) for S in panel], atol=1e-12)
    plt.close(fig)


def test_family_animation_has_one_frame_per_layer():
    layers = [Attention("softmax", A=np.diag([-1.0, s]), V=np.eye(2)) for s in (-0.5, 0.0, 0.5)]
    paths = family_runs(layers, cone_grid(3, 3), T=1.0, step=0.05)
    assert len(paths) == 3 and all(len(p) == len(cone_grid(3, 3)) for p in paths)
    # s = -0.5: every covariance shrinks; s = 0.5: the precision along e_2 drops by t (here t = 1)
    assert all(np.trace(S[-1]) < np.trace(S[0]) for S in paths[0])
    assert all(np.linalg.inv(S[-1])[1, 1] < np.linalg.inv(S[0])[1, 1] - 0.9 for S in paths[2])
    anim = family_animation(paths, ["a", "b", "c"])
    html = anim.to_jshtml()
    assert html.count("data:image/png;base64") == 3
    assert np.all(np.abs(disc_point(paths[1][0])) <= 1 + 1e-12)
