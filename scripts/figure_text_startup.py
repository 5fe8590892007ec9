"""IPython start-up file of the book build: each PNG a figure is printed to records its smallest text.

``scripts/build_book.py`` installs this file in ``$IPYTHONDIR/profile_default/startup/`` for the
kernels that execute the chapters (``IPYTHONDIR=_build/ipython``: the book build and
``make chapter``); a reader's own Jupyter never loads it. It wraps matplotlib's
``FigureCanvasBase.print_figure`` so that every PNG (the inline
figures the book shows and the files ``plotting.savefig`` writes) carries a PNG text chunk

    tokendynamics:text = {"min_pt": 8.33, "min_text": "legend entry", "dpi": 110, "n_texts": 37}

the smallest font size (points) of the visible, non-empty texts of the figure, one such text, and
the dpi of the PNG, and (``legend_overlaps``) the legends that lie on plotted data, by
``tests.helpers.legend_overlaps`` (read by ``tests/book/test_figure_legends.py``).
``tests/test_browser.py`` combines it with the displayed size of the image to
estimate the smallest text size in screen pixels. It changes nothing else in the PNG.
"""


def _tokendynamics_install_text_metadata():
    import json
    import os

    from matplotlib import rcParams
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.text import Text

    original = FigureCanvasBase.print_figure
    if getattr(original, "_tokendynamics_text", False):
        return

    def text_info(figure, dpi):
        # Tick labels exist (with their text) only once the ticks are updated, which a draw does;
        # the first print of a figure is its first draw, so update them here (no rendering).
        for ax in figure.axes:
            for axis in getattr(ax, "_axis_map", {}).values():
                axis.get_majorticklabels()
                axis.get_minorticklabels()
        texts = [
            t
            for t in figure.findobj(Text)
            if t.get_visible() and t.get_text().strip() and (t.get_alpha() is None or t.get_alpha() > 0)
        ]
        if dpi in (None, "figure"):
            dpi = figure.dpi if rcParams["savefig.dpi"] == "figure" else rcParams["savefig.dpi"]
        info = {"dpi": float(dpi), "n_texts": len(texts)}
        if os.environ.get("TOKENDYNAMICS_ROOT"):  # the legends lying on data (tests/helpers.py)
            import sys

            sys.path.insert(0, os.environ["TOKENDYNAMICS_ROOT"])
            from tests.helpers import legend_overlaps

            info["legend_overlaps"] = legend_overlaps(figure)
        if texts:
            smallest = min(texts, key=lambda t: t.get_fontsize())
            info["min_pt"] = round(float(smallest.get_fontsize()), 2)
            info["min_text"] = smallest.get_text().strip()[:60]
        return info

    def print_figure(self, filename, *args, **kwargs):
        fmt = kwargs.get("format")
        if fmt is None and isinstance(filename, (str, os.PathLike)):
            fmt = os.fspath(filename).rsplit(".", 1)[-1]
        if isinstance(fmt, str) and fmt.lower() == "png":
            try:
                info = text_info(self.figure, kwargs.get("dpi"))
            except Exception:  # never let the instrument break a chapter
                info = None
            if info is not None:
                metadata = dict(kwargs.get("metadata") or {})
                metadata.setdefault("tokendynamics:text", json.dumps(info))
                kwargs["metadata"] = metadata
        return original(self, filename, *args, **kwargs)

    print_figure._tokendynamics_text = True
    print_figure.__wrapped__ = original
    print_figure.__doc__ = original.__doc__
    FigureCanvasBase.print_figure = print_figure


_tokendynamics_install_text_metadata()
del _tokendynamics_install_text_metadata
