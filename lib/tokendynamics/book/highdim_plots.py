"""Figures of the high-dimensional chapter: one colour and one short name per attention variant,
and the run panels shared by its static figures and its explorer."""

from __future__ import annotations

from matplotlib.ticker import NullLocator

__all__ = ["VARIANT_COLORS", "VARIANT_LABELS", "VARIANT_WIDTHS", "run_axes", "plot_runs"]

#: One colour per attention variant, used by every figure of the high-dimensional chapter.
VARIANT_COLORS = {"linear": "#1f5fa8", "unnormalized_softmax": "#d95f02", "softmax": "#1b9e77"}
#: Short names of the variants for legends and tables.
VARIANT_LABELS = {"linear": "LA", "unnormalized_softmax": "USA", "softmax": "SA"}
#: Line widths (points) of the variants' curves: SA wide and USA thin, so that where their curves
#: coincide the USA line shows inside the SA one (draw with ``zorder=4 - width``: thin lines on top).
VARIANT_WIDTHS = {"linear": 1.6, "unnormalized_softmax": 1.0, "softmax": 3.0}


def run_axes(axes, T: float, d: int | None = None):
    r"""Style a pair of axes for :func:`plot_runs`: :math:`\hat R_2` on a log scale (left, with :math:`1/d`
    dotted, the value of uniform tokens), :math:`\hat R_1` (right), time on a symmetric-log axis
    (linear below t = 1) up to ``T``.

    Tick and axis labels are plain text, not mathtext, and there are no minor ticks: parsing
    mathtext tick labels and building minor ticks took most of a redraw, which matters in the live
    explorer (:func:`tokendynamics.book.explorers.highdim_explorer`).

    Parameters
    ----------
    axes : (Axes, Axes)
        The :math:`\hat R_2` and :math:`\hat R_1` panels.
    T : float
        Last time.
    d : int, optional
        Dimension (draws :math:`1/d`).

    Returns
    -------
    (Axes, Axes)
        The same pair ``axes``, styled in place (scales, limits, ticks and labels set; the :math:`1/d`
        line added to the first when ``d`` is given).
    """
    ax2, ax1 = axes
    if d:
        ax2.axhline(1 / d, color="0.5", lw=0.8, ls=":")
    ax2.set_yscale("log")
    ax2.set_ylim(2e-3, 1.5)
    ax2.set_yticks([0.01, 0.1, 1.0], ["0.01", "0.1", "1"])
    ax1.set_ylim(-0.08, 1.05)
    ax2.set_ylabel("R2 (mean squared overlap)")
    ax1.set_ylabel("R1 (mean overlap)")
    xt = [x for x in (0, 1, 10, 100, 1000) if x <= T]
    for ax in axes:
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, T)
        ax.set_xticks(xt, [f"{x:g}" for x in xt])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("time (depth) t")
    return axes


def plot_runs(axes, runs, kinds=("linear", "unnormalized_softmax"), d: int | None = None):
    r"""Two panels for runs of several variants (axes styled by :func:`run_axes`): :math:`\hat R_2(t)`
    (left) and :math:`\hat R_1(t)` (right), one colour per variant.

    ``axes`` is a pair of matplotlib axes; ``runs`` maps variant names to :class:`RunSummary`
    (e.g. the dict returned by :func:`tokendynamics.book.explorers.highdim_update`).

    Parameters
    ----------
    axes : (Axes, Axes)
        The :math:`\hat R_2` and :math:`\hat R_1` panels.
    runs : dict of str to RunSummary
        One run per variant.
    kinds : sequence of str
        The variants drawn.
    d : int, optional
        Dimension (draws :math:`1/d`).

    Returns
    -------
    (Axes, Axes)
        The same pair ``axes`` with one :math:`\hat R_2` curve and one :math:`\hat R_1` curve per variant of
        ``kinds``, styled by :func:`run_axes` up to the longest run's final time, and a legend on the
        :math:`\hat R_2` panel.

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book: ``chapters/06_high_dimensional.md``,
    equation (eq-hd-R).
    """
    ax2, ax1 = axes
    for kind in kinds:
        r = runs[kind]
        ax2.plot(r.t, r.R2, color=VARIANT_COLORS[kind], lw=1.8, label=VARIANT_LABELS[kind])
        ax1.plot(r.t, r.R1, color=VARIANT_COLORS[kind], lw=1.5, label=VARIANT_LABELS[kind])
    run_axes(axes, max(runs[k].T for k in kinds), d)
    ax2.legend(fontsize="x-small", loc="lower right")
    return axes
