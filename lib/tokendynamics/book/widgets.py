"""The small framework behind the chapters' live explorers.

An explorer is a figure and a few controls. Moving a control recomputes what the figure shows with
the library and redraws it; :class:`Explorer` does the common part once for all chapters:

* **controls from a spec**: a tuple of :class:`Control` (:func:`slider`, :func:`choice`) becomes
  ipywidgets (built only in a live session: :func:`~tokendynamics.book.plotting.live_widgets`);
  controls that the current state does not use (:meth:`Explorer.uses`) are hidden, and moving them
  recomputes nothing;
* **one figure, redrawn in place**: the figure and its artists are made once (:meth:`Explorer.setup`);
  an update changes their data (:meth:`Explorer.draw`: ``set_data``, ``set_offsets``,
  ``set_segments``, ``set_text``), never makes a new figure. The figure is a plain
  :class:`matplotlib.figure.Figure` on an Agg canvas, outside pyplot, so the inline backend never
  shows it by itself;
* **a cache per control state**: :meth:`Explorer.compute` (the library call) runs once per state of
  the controls it uses (:meth:`Explorer.key`); going back to a state is a redraw. Library errors are
  cached too (a slow non-convergence is not recomputed). :meth:`Explorer.memo` caches a part of a
  computation that fewer controls change;
* **a status line, never a traceback**: :meth:`Explorer.describe` says what was computed (a
  blow-up time, a regime) in the status line under the controls; a library error (a Sinkhorn
  iteration that does not converge, an invalid parameter) or any other exception is written there
  (in red) and replaces the picture by a message. A callback never raises;
* **the picture the front end shows**: the figure is rendered to a PNG at its own dpi (no tight
  bounding box: the margins are fixed once) and sent to an ``ipywidgets.Image``. Only the artists
  an update changes (:meth:`Explorer.dynamic`) are redrawn, over a background kept while the axes
  limits stay the same (:func:`sticky_limits` keeps them);
* **the static stand-in** (:meth:`Explorer.animate`): the same figure and drawing over a list of
  precomputed states, as a matplotlib animation for :func:`~tokendynamics.book.plotting.animation_html`.

A chapter's explorer (:mod:`tokendynamics.book.explorers`) subclasses :class:`Explorer` with its
controls, ``compute`` (a call of its pure ``*_update`` function), ``setup``, ``draw`` and ``describe``.
Nothing here is mathematics.
"""

from __future__ import annotations

import html
import inspect
import io
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..errors import BlowUpError, ConvergenceError, NonFiniteError, TokenDynamicsError
from ..validation import PARAMETER_DOCS
from .plotting import BOOK_STYLE, live_widgets

__all__ = [
    "Control",
    "slider",
    "choice",
    "Explorer",
    "error_message",
    "sticky_limits",
    "live_explorer",
    "EXPLORER_DOC",
]

#: Numpydoc fragments the explorers share (``@fill_doc(EXPLORER_DOC)``, :mod:`tokendynamics.docstrings`).
#:
#: :meta hide-value:
EXPLORER_DOC = {
    "mode": """\
        mode : {"fast", "full"}
            Setting of the chapter's parameters (``tokendynamics.book.experiments``).""",
    "values": """\
        **values
            Initial values of the controls.""",
    "AV": PARAMETER_DOCS["matrices2"],
    "beta": PARAMETER_DOCS["beta"],
}

ExplorerT = TypeVar("ExplorerT", bound="Explorer")

#: Style of every explorer figure: the book's style, plain-text numbers (no mathtext in tick labels),
#: no grid (fewer lines to draw). Font sizes are chosen so that every text is at least 9 px on screen
#: at the explorers' 96 dpi (and at the static animations' width, see ``plotting.animation_html``).
EXPLORER_STYLE = {
    **BOOK_STYLE,
    "axes.grid": False,
    "font.size": 10.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.5,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 8.5,
    "axes.formatter.use_mathtext": False,
    "savefig.bbox": "standard",
}


@dataclass(frozen=True)
class Control:
    """One control of an explorer: a float slider (``options`` is None) or a choice among ``options``.

    ``name`` is the keyword the explorer's state uses, ``label`` what the reader sees (default: the
    name). Sliders update when released (``continuous_update=False``): one update per move.

    Attributes
    ----------
    name : str
        Keyword of the explorer's state.
    value : float or object
        Initial value.
    min, max, step : float or None
        Slider range and step (sliders only).
    options : tuple or None
        The choices (choices only).
    label : str or None
        What the reader sees.
    """

    name: str
    value: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    options: tuple | None = None
    label: str | None = None

    def __post_init__(self):
        if self.options is None:
            if self.min is None or self.max is None or not (self.min <= self.value <= self.max):
                raise ValueError(
                    f"slider {self.name!r}: need min <= value <= max, got {self.min, self.value, self.max}"
                )
        elif self.value not in self.options:
            raise ValueError(f"choice {self.name!r}: value {self.value!r} is not one of {self.options}")

    @property
    def description(self) -> str:
        return self.label or self.name

    def build(self):
        """The ipywidget of this control.

        Returns
        -------
        ipywidgets.Dropdown or ipywidgets.FloatSlider
            A dropdown over ``options`` for a choice, else a float slider from ``min`` to ``max`` by
            ``step`` that reports on release (``continuous_update=False``); both start at ``value``.
        """
        import ipywidgets as W

        style = {"description_width": "initial"}
        if self.options is not None:
            return W.Dropdown(
                options=list(self.options),
                value=self.value,
                description=self.description,
                style=style,
                layout=W.Layout(width="250px"),
            )
        return W.FloatSlider(
            value=self.value,
            min=self.min,
            max=self.max,
            step=self.step,
            description=self.description,
            continuous_update=False,
            readout_format=".2f",
            style=style,
            layout=W.Layout(width="250px"),
        )


def slider(name: str, value: float, lo: float, hi: float, step: float = 0.05, label: str | None = None) -> Control:
    """A float slider from ``lo`` to ``hi``.

    Parameters
    ----------
    name : str
        Keyword of the state.
    value : float
        Initial value.
    lo, hi : float
        Range.
    step : float
        Step.
    label : str, optional
        What the reader sees.

    Returns
    -------
    Control
    """
    return Control(name, float(value), float(lo), float(hi), float(step), None, label)


def choice(name: str, options: Sequence, value=None, label: str | None = None) -> Control:
    """A drop-down among ``options`` (the first one by default).

    Parameters
    ----------
    name : str
        Keyword of the state.
    options : sequence
        The choices.
    value : object, optional
        Initial choice.
    label : str, optional
        What the reader sees.

    Returns
    -------
    Control
    """
    options = tuple(options)
    return Control(name, options[0] if value is None else value, options=options, label=label)


def error_message(err: BaseException) -> str:
    """One line for the status: what failed, in the reader's words, and the library's message.

    Parameters
    ----------
    err : BaseException
        What the library raised: a :class:`~tokendynamics.errors.TokenDynamicsError` (blow-up,
        no convergence, non-finite values), a ``ValueError`` for a value out of range, or anything else.

    Returns
    -------
    str
        ``"<what>: <message>"``, the message on one line and cut at 240 characters.

    Examples
    --------
    >>> error_message(ValueError("beta must be positive"))
    'not allowed: beta must be positive'
    """
    if isinstance(err, ConvergenceError):
        what = "no convergence"
    elif isinstance(err, BlowUpError):
        what = "blow-up"
    elif isinstance(err, NonFiniteError):
        what = "non-finite values"
    elif isinstance(err, TokenDynamicsError):
        what = "library error"
    elif isinstance(err, ValueError):
        what = "not allowed"
    else:
        what = f"unexpected error ({type(err).__name__})"
    text = " ".join(str(err).split())
    return f"{what}: {text[:240]}" if text else what


def sticky_limits(current, lo: float, hi: float, *, pad: float = 0.08, fill: float = 0.4) -> tuple[float, float]:
    """Axis limits for data in ``[lo, hi]`` that stay ``current`` while the data fit in them and fill at
    least ``fill`` of them; otherwise ``[lo, hi]`` widened by ``pad`` of its length on each side.

    Unchanged limits keep the explorer's background (ticks, labels) valid: the next update redraws
    only the data.

    Parameters
    ----------
    current : (float, float) or None
        The current limits.
    lo, hi : float
        Range of the data.
    pad : float
        Margin, as a fraction of the range.
    fill : float
        Smallest fraction of the limits the data must fill to keep them.

    Returns
    -------
    (float, float)

    Examples
    --------
    >>> sticky_limits((0.0, 1.0), 0.2, 0.9)
    (0.0, 1.0)
    """
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return tuple(current) if current is not None else (-1.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5 * max(abs(lo), 1e-3), hi + 0.5 * max(abs(hi), 1e-3)
    if current is not None:
        c0, c1 = current
        if c0 <= lo and hi <= c1 and hi - lo >= fill * (c1 - c0):
            return float(c0), float(c1)
    span = hi - lo
    return lo - pad * span, hi + pad * span


class _LRU:
    """A small least-recently-used mapping."""

    def __init__(self, size: int):
        self.size = int(size)
        self.data: OrderedDict = OrderedDict()

    def get(self, key):
        if key in self.data:
            self.data.move_to_end(key)
            return True, self.data[key]
        return False, None

    def put(self, key, value):
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


class _Failed:
    """A cached library error (recomputing a slow failure would only fail again)."""

    def __init__(self, err: BaseException):
        self.err = err


class Explorer:
    """Base class of the chapters' explorers (see the module doc).

    Subclasses set ``controls`` (and may set ``figsize``, ``dpi``, ``rows``) and
    implement :meth:`compute`, :meth:`setup`, :meth:`draw`, :meth:`describe` (and :meth:`uses` if
    some controls matter only in some states). ``Explorer(**values)`` starts from the controls'
    values, overridden by ``values``; nothing is computed until :meth:`update` or :meth:`show`.

    Attributes after an update: ``state`` (control values), ``result`` (what ``compute``
    returned, or None after an error), ``error`` (the exception, or None), ``status`` (the
    status line), ``png`` (the last rendered image), ``fig``, and ``timings`` (seconds
    of the last update: ``library``, ``draw``, ``image``, ``total`` in wall-clock time and the same
    with a ``cpu_`` prefix in CPU time; ``cached`` is 1.0 if the library call was skipped).

    Parameters
    ----------
    **values
        Initial values of some controls (the others start at their ``value``).
    """

    controls: tuple[Control, ...] = ()
    #: Groups of control names, one row of controls each (default: the controls in their order, wrapped).
    rows: tuple[tuple[str, ...], ...] | None = None
    figsize: tuple[float, float] = (8.0, 3.4)
    dpi: float = 96.0
    cache_size: int = 64

    def __init__(self, **values):
        names = [c.name for c in self.controls]
        unknown = set(values) - set(names)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no control(s) {sorted(unknown)}; controls: {names}")
        self.state: dict[str, Any] = {c.name: c.value for c in self.controls} | values
        with mpl.rc_context(self.style()):
            self.fig = Figure(figsize=self.figsize, dpi=self.dpi)
        FigureCanvasAgg(self.fig)
        self._message = self.fig.text(0.5, 0.5, "", ha="center", va="center", wrap=True, visible=False, fontsize=11)
        #: The figure's first line in a static animation (:meth:`frame`), where there is no status line;
        #: the explorers keep their top margin for it. Hidden in the live explorer (text is slow to draw).
        self.headline = self.fig.text(0.01, 0.985, "", ha="left", va="top", fontsize=10, visible=False)
        self._dynamic: list = [self.headline]
        self._background = None
        self._background_key: tuple = ()
        self._cache = _LRU(self.cache_size)
        self._memo: dict[str, _LRU] = {}
        self._ready = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.status = ""
        self.png: bytes | None = None
        self.timings: dict[str, float] = {}
        self.calls = 0  # library calls (compute) actually run
        self.full_draws = 0  # renders that redrew the whole figure (the others redrew only the dynamic artists)
        self._ui = None

    # ---- what a chapter's explorer implements ------------------------------------------------------

    def compute(self, state: dict) -> Any:
        """The library call for ``state`` (a pure ``*_update`` function); may raise.

        Parameters
        ----------
        state : dict
            Control name -> value, every value already within its control's range.

        Returns
        -------
        object
            What :meth:`draw` needs.
        """
        raise NotImplementedError

    def setup(self, fig: Figure) -> None:
        """Make the axes and the artists (once): fixed margins, empty lines and collections.

        Parameters
        ----------
        fig : matplotlib.figure.Figure
            The explorer's figure.
        """
        raise NotImplementedError

    def draw(self, result: Any, state: dict) -> None:
        """Put ``result`` into the artists made by :meth:`setup` (in place).

        Parameters
        ----------
        result : object
            What :meth:`compute` returned for ``state``.
        state : dict
            The control values ``result`` was computed for (for titles and labels).
        """
        raise NotImplementedError

    def describe(self, result: Any, state: dict) -> str:
        """The status line for a computed ``result``.

        Parameters
        ----------
        result : object
            The computed result (never an error: errors have their own status line).
        state : dict
            The control values it was computed for.

        Returns
        -------
        str
            One line in the reader's words (empty: no status line).
        """
        return ""

    def uses(self, state: dict) -> Iterable[str]:
        """Names of the controls that matter in ``state`` (default: all); the others are hidden.

        Parameters
        ----------
        state : dict
            Control name -> value (a choice may make other controls irrelevant).

        Returns
        -------
        iterable of str
            Control names, a subset of those in ``controls``.
        """
        return [c.name for c in self.controls]

    def style(self) -> dict:
        """matplotlib rcParams in force while the figure is set up, drawn and rendered.

        Returns
        -------
        dict
            rcParams (default: ``EXPLORER_STYLE``); an explorer overrides this to change them.
        """
        return EXPLORER_STYLE

    # ---- the framework ----------------------------------------------------------------------------

    def key(self, state: dict) -> Hashable:
        """The cache key of ``state``: the values of the controls it uses.

        Parameters
        ----------
        state : dict
            Control name -> value; the names outside :meth:`uses` do not enter the key.

        Returns
        -------
        tuple
            ``(name, value)`` pairs sorted by name.
        """
        return tuple((name, state[name]) for name in sorted(self.uses(state)))

    def memo(self, tag: str, key: Hashable, compute: Callable[[], Any], size: int = 16) -> Any:
        """``compute()`` cached under ``(tag, key)``: for a part of :meth:`compute` that fewer controls change.

        Parameters
        ----------
        tag : str
            Which part of the computation.
        key : hashable
            Its cache key.
        compute : callable
            Computes the part.
        size : int
            Entries kept for ``tag``.

        Returns
        -------
        object
            The cached value, or what ``compute()`` returned (then cached).
        """
        cache = self._memo.setdefault(tag, _LRU(size))
        hit, value = cache.get(key)
        if not hit:
            value = compute()
            cache.put(key, value)
        return value

    def result_for(self, state: dict) -> Any:
        """The (cached) result of :meth:`compute` for ``state``; raises the (cached) library error.

        Parameters
        ----------
        state : dict
            Control name -> value; looked up by :meth:`key`.

        Returns
        -------
        object
            :meth:`compute`'s result, from the cache when an equal key was computed before.
        """
        key = self.key(state)
        hit, value = self._cache.get(key)
        if not hit:
            self.calls += 1
            try:
                value = self.compute(dict(state))
            except Exception as err:  # cached: the same state fails the same way
                value = _Failed(err)
            self._cache.put(key, value)
        self.timings = {"cached": float(hit)}
        if isinstance(value, _Failed):
            raise value.err
        return value

    def update(self, **changes) -> str:
        """Set controls, recompute (or take from the cache), redraw in place and render; returns the status.

        Never raises: a library error, or any other exception, becomes the status line and a message
        on the figure.

        Parameters
        ----------
        **changes
            New values of controls, by name (none: recompute the current state). An unknown name
            changes nothing and is reported in the status line.

        Returns
        -------
        str
            The status line: :meth:`describe` of the result, or :func:`error_message` of the error.
        """
        marks = [(time.perf_counter(), time.process_time())]
        unknown = set(changes) - set(self.state)
        if unknown:
            self.error = TypeError(f"no control(s) {sorted(unknown)}")
            self.status = error_message(self.error)
            self._refresh_ui()
            return self.status
        try:
            self.state = {**self.state, **changes}
            state = dict(self.state)
            try:
                self.result, self.error = self.result_for(state), None
            except Exception as err:
                self.result, self.error = None, err
            marks.append((time.perf_counter(), time.process_time()))
            with mpl.rc_context(self.style()):
                if self.error is None:
                    if not self._ready:
                        self.setup(self.fig)
                        self._ready = True
                    self.draw(self.result, state)
                    self.status = self.describe(self.result, state)
                    self.headline.set_visible(False)
                    self._show_message(None)
                else:
                    self.status = error_message(self.error)
                    self._show_message(self.status)
                marks.append((time.perf_counter(), time.process_time()))
                self.png = self.render()
        except Exception as err:  # drawing or rendering failed: say so, never raise from a callback
            self.error = err
            self.status = f"could not draw this state ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
            try:
                self._show_message(self.status)
                with mpl.rc_context(self.style()):
                    self.png = self.render()
            except Exception:
                pass
        marks += [marks[-1]] * (3 - len(marks)) + [(time.perf_counter(), time.process_time())]
        cached = self.timings.get("cached", 0.0)
        self.timings = {"cached": cached}
        for k, name in enumerate(("library", "draw", "image")):
            self.timings[name] = marks[k + 1][0] - marks[k][0]
            self.timings[f"cpu_{name}"] = marks[k + 1][1] - marks[k][1]
        self.timings["total"] = marks[-1][0] - marks[0][0]
        self.timings["cpu_total"] = marks[-1][1] - marks[0][1]
        self._refresh_ui()
        return self.status

    def _show_message(self, text: str | None) -> None:
        for ax in self.fig.axes:
            ax.set_visible(text is None)
        if text is not None:
            self.headline.set_visible(False)
        self._message.set_text(text or "")
        self._message.set_visible(text is not None)

    def dynamic(self, *artists):
        """Mark artists that :meth:`draw` changes (data, colours, texts); returns the (first) artist.

        :meth:`render` draws everything else once, keeps that picture as the background while the axes
        limits stay the same, and redraws only these artists over it (blitting). An explorer that
        changes anything else (a legend text, a title) calls :meth:`invalidate`.

        Parameters
        ----------
        *artists : matplotlib artists
            Made in :meth:`setup` (lines, collections, images, texts).

        Returns
        -------
        artist or tuple of artists
            The artist itself when one is given (so that ``line = self.dynamic(ax.plot(...)[0])``
            reads naturally), else the tuple.
        """
        self._dynamic.extend(artists)
        return artists[0] if len(artists) == 1 else artists

    def invalidate(self) -> None:
        """Redraw the whole figure at the next :meth:`render` (something outside :meth:`dynamic` changed)."""
        self._background = None

    def _layout_key(self) -> tuple:
        key = [self._message.get_visible(), self.fig.dpi, tuple(self.fig.get_size_inches())]
        for ax in self.fig.axes:
            key += [ax.get_visible(), tuple(ax.get_xlim()), tuple(ax.get_ylim())]
            if hasattr(ax, "get_zlim"):
                key.append(tuple(ax.get_zlim()))
        return tuple(key)

    def render(self) -> bytes:
        """The figure as a PNG at the figure's dpi (what the front end shows).

        The artists that do not change (axes, ticks, labels, legends) are drawn once and kept as a
        background while the axes limits stay the same; then only the :meth:`dynamic` artists are
        drawn over it. PNG at zlib level 1 (faster than the default, a few per cent larger).

        Returns
        -------
        bytes
            The PNG file's bytes (kept as ``png`` by :meth:`update`).
        """
        from PIL import Image

        canvas = self.fig.canvas
        key = self._layout_key()
        if self._background is None or key != self._background_key:
            shown = [a for a in self._dynamic if a.get_visible()]
            for a in shown:
                a.set_visible(False)
            try:
                canvas.draw()
                self.full_draws += 1
                self._background = canvas.copy_from_bbox(self.fig.bbox)
                self._background_key = key
            finally:
                for a in shown:
                    a.set_visible(True)
        else:
            canvas.restore_region(self._background)
        renderer = canvas.get_renderer()
        for a in self._dynamic:
            if a.get_visible() and (a.axes is None or a.axes.get_visible()):
                if hasattr(a, "do_3d_projection"):
                    a.do_3d_projection()
                a.draw(renderer)
        buf = io.BytesIO()
        Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", compress_level=1)
        return buf.getvalue()

    # ---- the widgets (live sessions only) -----------------------------------------------------------

    def widget(self):
        """The ipywidgets box: controls, status line, image; built once, first update included.

        Returns
        -------
        ipywidgets.VBox
            Rows of controls (``rows``, or one row), the status line and the image; the same box on
            every call. Each control's change runs :meth:`update`.
        """
        if self._ui is not None:
            return self._ui["box"]
        import ipywidgets as W

        built = {c.name: c.build() for c in self.controls}
        for name, w in built.items():
            w.value = self.state[name]
            w.observe(self._on_change, names="value")
        rows = self.rows or (tuple(built),)
        boxes = [W.Box([built[n] for n in row], layout=W.Layout(display="flex", flex_flow="row wrap")) for row in rows]
        status = W.HTML(layout=W.Layout(min_height="1.6em"))
        image = W.Image(format="png", layout=W.Layout(width=f"{round(self.figsize[0] * self.dpi)}px"))
        self._ui = {"controls": built, "status": status, "image": image}
        self._ui["box"] = W.VBox([*boxes, status, image])
        self.update()
        return self._ui["box"]

    def _on_change(self, change) -> None:
        name = next(n for n, w in self._ui["controls"].items() if w is change["owner"])
        self.update(**{name: change["new"]})

    def _refresh_ui(self) -> None:
        if self._ui is None:
            return
        try:
            used = set(self.uses(self.state))
            for name, w in self._ui["controls"].items():
                display = None if name in used else "none"
                if w.layout.display != display:
                    w.layout.display = display
            colour = "#b23a48" if self.error is not None else "#333"
            self._ui["status"].value = f'<span style="color: {colour}">{html.escape(self.status)}</span>'
            if self.png is not None:
                self._ui["image"].value = self.png
        except Exception:  # the front end is gone or a widget was closed: nothing to show
            pass

    def show(self):
        """Display the explorer (its widget box) in Jupyter; returns the box.

        Returns
        -------
        ipywidgets.VBox
            The box of :meth:`widget`, after displaying it.
        """
        from IPython.display import display

        box = self.widget()
        display(box)
        return box

    def _ipython_display_(self):
        self.show()

    # ---- the static stand-in ------------------------------------------------------------------------

    def frame(self, state: dict, result: Any, headline: str | None = None) -> None:
        """Draw a precomputed ``result`` for ``state`` (a frame of :meth:`animate`) under a headline
        (:meth:`describe`, or ``headline``).

        Parameters
        ----------
        state : dict
            Control values of the frame (those not given keep their current value).
        result : object
            A precomputed result.
        headline : str, optional
            The headline (default: :meth:`describe`).
        """
        self.state = {**self.state, **state}
        with mpl.rc_context(self.style()):
            if not self._ready:
                self.setup(self.fig)
                self._ready = True
            self.draw(result, dict(self.state))
            self._show_message(None)
            self.headline.set_text(self.describe(result, self.state) if headline is None else headline)
            self.headline.set_visible(True)

    def animate(self, frames: Sequence[tuple[dict, Any]], *, interval: int = 400, caption: Callable | None = None):
        """A matplotlib animation of this explorer's figure over precomputed ``(state, result)`` frames.

        Each frame is drawn by :meth:`draw` as in the live explorer, with the headline
        ``caption(state, result)`` (default :meth:`describe`). Render with
        :func:`~tokendynamics.book.plotting.animation_html`; afterwards the figure shows the last frame.

        Parameters
        ----------
        frames : sequence of (dict, object)
            Precomputed states and results.
        interval : int
            Milliseconds between frames.
        caption : callable, optional
            ``caption(state, result)``, the headline of a frame.

        Returns
        -------
        matplotlib.animation.FuncAnimation
        """
        from matplotlib.animation import FuncAnimation

        if not frames:
            raise ValueError("an animation needs at least one frame")

        def show(k):
            state, result = frames[k]
            self.frame(state, result, None if caption is None else caption({**self.state, **state}, result))
            return []

        show(0)
        return FuncAnimation(self.fig, show, frames=len(frames), interval=interval, blit=False)


def live_explorer(cls: type[ExplorerT], name: str, chapter: str) -> Callable[..., ExplorerT | None]:
    """A chapter's explorer function: ``cls(*args, **values)`` in a live session, None in the headless build.

    The function (e.g. ``variants_explorer``, see :mod:`tokendynamics.book.explorers`) is what a
    chapter's explorer cell calls. It takes the arguments of ``cls`` and has the class's signature;
    its docstring is the class's Parameters and References under the headline "``chapter``'s live
    explorer", with a Returns section.

    Parameters
    ----------
    cls : type
        A subclass of :class:`Explorer`.
    name : str
        Name of the function (e.g. ``"variants_explorer"``).
    chapter : str
        Whose explorer it is (e.g. ``"Chapter 01"``).

    Returns
    -------
    callable
    """

    def make(*args, **values):
        return cls(*args, **values) if live_widgets() else None

    _, _, body = inspect.cleandoc(cls.__doc__ or "").partition("\n\n")
    parameters, references, reference = body.partition("References\n----------")
    returns = f"Returns\n-------\n{cls.__name__} or None\n\n"
    headline = f"{chapter}'s live explorer (displayed by Jupyter); None in the headless book build."
    make.__doc__ = f"{headline}\n\n{parameters}{returns}{references}{reference}"
    make.__name__ = make.__qualname__ = name
    make.__module__ = cls.__module__
    make.__signature__ = inspect.signature(cls).replace(return_annotation=f"{cls.__name__} | None")  # type: ignore[attr-defined]
    return make
