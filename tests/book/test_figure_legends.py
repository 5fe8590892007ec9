"""Legends stay off the data: :func:`tests.helpers.legend_overlaps` on small figures, and on the book's figures.

The book build's IPython start-up file (``scripts/figure_text_startup.py``) runs the same check on every
figure a chapter prints and records its findings in the PNG (``legend_overlaps`` of the
``tokendynamics:text`` chunk); the second test reads them for the figures whose legends were moved off
their data, from the last build of each chapter (``scripts/build_book.py all`` or ``chapter NAME``);
it is marked ``book``: `make test` runs it after the build, and a figure missing or built without
the check fails it.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.transforms import IdentityTransform

from tests.helpers import legend_overlaps

BUILD = Path(__file__).resolve().parents[2] / "_build"

#: chapter -> the figures (PNG stems) whose legends were moved off their data
CHECKED = {
    "02_gaussian_preservation": ["gaussian-exact-rank"],
    "03_gradient_flow": ["gradient-flow-nonconvex"],
    "06_high_dimensional": ["highdim-order-parameters", "highdim-histograms", "highdim-sweeps"],
    "07_phase_diagrams": ["phase-critical", "phase-counts"],
}


def test_legend_overlaps_flags_legends_on_lines_points_and_labels_but_not_a_legend_below():
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(4, 2))
    x = np.linspace(0, 1, 5)
    ax.plot(x, 0.5 + 0 * x, label="flat")  # five vertices; the legend sits between two of them
    ax.legend(loc="center")
    ax2.scatter([0.5], [0.5], label="point")
    ax2.legend(loc="center")
    assert [m.split(" covers")[0] for m in legend_overlaps(fig)] == ["legend [flat]", "legend [point]"]
    ax.get_legend().remove()
    ax2.get_legend().remove()
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center")
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    assert legend_overlaps(fig) == []
    ax.set_xlabel("time")
    fig.canvas.draw()
    fig.legends.clear()  # a legend on the x label, off the data
    ax.legend(loc="center", bbox_to_anchor=ax.xaxis.label.get_window_extent().p1, bbox_transform=IdentityTransform())
    assert [m.split(" covers")[0] for m in legend_overlaps(fig)] == ["legend [flat]"]
    plt.close(fig)


@pytest.mark.book
@pytest.mark.parametrize("chapter, stem", [(c, s) for c, stems in CHECKED.items() for s in stems])
def test_built_figures_keep_their_legends_off_the_data(chapter, stem):
    from PIL import Image

    where = (BUILD / "figures" / chapter, BUILD / "run" / chapter / "figures")
    pngs = [d / f"{stem}.png" for d in where if (d / f"{stem}.png").exists()]
    assert pngs, f"{chapter} is not built (scripts/build_book.py all, or chapter {chapter})"
    png = max(pngs, key=lambda p: p.stat().st_mtime)  # the latest build
    with Image.open(png) as im:
        info = json.loads(im.info.get("tokendynamics:text", "{}"))
    assert "legend_overlaps" in info, f"{png} was built without the legend check"
    assert info["legend_overlaps"] == [], f"{png}: {info['legend_overlaps']}"


def test_four_cone_blocks_make_one_short_row_with_titles_apart():
    from tokendynamics.book.gaussian_plots import cone_and_disc_figure
    from tokendynamics.book.studies.gaussian import cone_grid

    covs = [np.array([S, 0.5 * S]) for S in cone_grid(3, 3)]
    fig = cone_and_disc_figure(dict.fromkeys(("softmax", "L2", "2-head", "Sinkhorn"), covs))
    assert fig.get_size_inches()[1] < 5.0  # one row of four blocks (was a 2 x 2 grid, 15.6 in tall)
    fig.canvas.draw()
    boxes = [ax.title.get_window_extent() for ax in fig.axes if ax.get_title()]
    assert len(boxes) == 4 and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(fig)
