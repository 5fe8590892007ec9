"""Kernel-free twins of the chapters' live explorers: their states precomputed at build time.

A live explorer (:mod:`tokendynamics.book.explorers`) needs a kernel. Its twin on the static page is
the same explorer run while the book is built, over a grid of one to three of its controls (the
table ``static_<explorer>`` of ``experiments.toml``, e.g. ``[static_regimes_explorer.fast.grid]``,
with a fast and a full setting; the other controls keep their defaults). Every state is drawn by
the explorer's own :meth:`~tokendynamics.book.widgets.Explorer.update` (library call, drawing in
place, render: one implementation of the figure); its picture is kept as a 256-colour PNG
(:func:`~tokendynamics.book.plotting.palette_png`, with its smallest text recorded) and its status
line as text. The states are cached (:func:`~tokendynamics.book.cache.cached`,
``data/static_<explorer>_<mode>.npz``): they are recomputed when the package's code or its
settings change (the cache's fingerprint), in either setting.

A chapter shows the twin with one call next to its live explorer's cell,
``static_explorer("regimes_explorer", mode)``: a ``<div class="static-explorer">`` holding one
labelled form control per grid axis (``<input type="range">`` over the grid's indices, or a
``<select>``) with its current value, one ``<img>``, the status line under it, a caption saying
what is precomputed, and the states as JSON. ``_static/book.js`` swaps the image and the status
line when a control moves and prefetches the neighbouring states; the build
(``_ext/book_pages.py``) writes the pictures to files under ``_images/states/`` and adds the
Binder and Colab links to the caption where the book knows its repository.
"""

from __future__ import annotations

import base64
import html
import inspect
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import explorers
from .cache import cached
from .experiments import settings
from .plotting import live_widgets, palette_png, smallest_text
from .widgets import Control, Explorer

__all__ = [
    "StaticStates",
    "explorer_class",
    "static_grid",
    "precompute",
    "static_states",
    "static_explorer_html",
    "static_explorer",
]


@dataclass(frozen=True)
class StaticStates:
    """An explorer's states over a grid: state ``k`` is the ``k``-th of ``itertools.product`` of the axes.

    Attributes
    ----------
    axes : tuple of (Control, tuple)
        Each grid axis: the control and its values.
    frames : tuple of bytes
        The PNG of each state.
    status : tuple of str
        The status line of each state.
    errors : tuple of bool
        Whether the state is a library error (its status says which).
    start : tuple of int
        Position (one index per axis) of the explorer's own initial state, or the nearest on the grid.
    """

    axes: tuple[tuple[Control, tuple], ...]
    frames: tuple[bytes, ...]
    status: tuple[str, ...]
    errors: tuple[bool, ...]
    start: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(values) for _, values in self.axes)


def explorer_class(name: str) -> type[Explorer]:
    """The explorer class behind a chapter's explorer function, e.g. ``"regimes_explorer"`` -> ``RegimesExplorer``.

    Parameters
    ----------
    name : str
        Name of an explorer function of :mod:`tokendynamics.book.explorers`.

    Returns
    -------
    type
        A subclass of :class:`~tokendynamics.book.widgets.Explorer`.
    """
    cls = getattr(explorers, "".join(part.title() for part in name.split("_")), None)
    if name not in explorers.__all__ or not (inspect.isclass(cls) and issubclass(cls, Explorer)):
        known = [n for n in explorers.__all__ if n.endswith("_explorer")]
        raise ValueError(f"explorer must be one of {known}, got {name!r}")
    return cls


def static_grid(name: str, mode: str = "fast", grid: dict | None = None) -> dict[str, tuple]:
    """The grid of explorer ``name``'s twin: control name -> values, checked against its controls.

    One to three controls; a slider's values lie in its range, at least five of them, increasing;
    a choice's values are among its options.

    Parameters
    ----------
    name : str
        Explorer function, e.g. ``"regimes_explorer"``.
    mode : {"fast", "full"}
        Setting of ``experiments.toml``'s table ``static_<name>``.
    grid : dict, optional
        A grid to check instead of the table's.

    Returns
    -------
    dict of str to tuple
        In the table's order: the first control is the outer axis.
    """
    controls = {c.name: c for c in explorer_class(name).controls}
    grid = settings(f"static_{name}", mode)["grid"] if grid is None else grid
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"static_{name}: a grid has one to three controls, got {list(grid)}")
    out = {}
    for key, values in grid.items():
        control, values = controls.get(key), tuple(values)
        if control is None:
            raise ValueError(f"static_{name}: {key!r} is not a control of {name}; controls: {list(controls)}")
        if control.options is not None:
            need, ok = f"values among {control.options}", all(v in control.options for v in values)
        else:
            need = f"at least 5 increasing values in [{control.min:g}, {control.max:g}]"
            ok = len(values) >= 5 and list(values) == sorted(set(values))
            ok = ok and control.min <= values[0] and values[-1] <= control.max
        if not (values and ok):
            raise ValueError(f"static_{name}: grid {key!r} needs {need}, got {list(values)}")
        out[key] = values
    return out


def _state_png(explorer: Explorer) -> bytes:
    """The explorer's last picture as a palette PNG recording its dpi and smallest text (as the book's figures do)."""
    pt, text = smallest_text(explorer.fig)
    record = {"dpi": explorer.fig.dpi, "min_pt": round(pt, 2), "min_text": text[:60]}
    return palette_png(explorer.png or b"", text={"tokendynamics:text": json.dumps(record)}, dpi=explorer.fig.dpi)


def _nearest(values: Sequence, value: Any) -> int:
    if value in values:
        return list(values).index(value)
    if isinstance(value, str):
        return 0
    return int(np.argmin([abs(float(v) - float(value)) for v in values]))


def precompute(explorer: Explorer, grid: Mapping[str, Sequence]) -> StaticStates:
    """Every state of ``grid`` drawn by ``explorer.update`` (its library call, cache, drawing and render).

    Parameters
    ----------
    explorer : Explorer
        A fresh explorer (its current state gives the other controls and the start).
    grid : dict of str to sequence
        Control name -> values (:func:`static_grid`).

    Returns
    -------
    StaticStates
    """
    controls = {c.name: c for c in explorer.controls}
    start = tuple(_nearest(values, explorer.state[key]) for key, values in grid.items())
    frames, status, errors = [], [], []
    for values in itertools.product(*grid.values()):
        explorer.update(**dict(zip(grid, values)))
        frames.append(_state_png(explorer))
        status.append(explorer.status)
        errors.append(explorer.error is not None)
    axes = tuple((controls[key], tuple(values)) for key, values in grid.items())
    return StaticStates(axes, tuple(frames), tuple(status), tuple(errors), start)


def static_states(name: str, mode: str = "fast", **init) -> StaticStates:
    """The states of explorer ``name``'s twin in ``mode``, from the cache or computed (:func:`precompute`).

    Parameters
    ----------
    name : str
        Explorer function, e.g. ``"regimes_explorer"``.
    mode : {"fast", "full"}
        Setting of the grid and of the explorer (passed to it if it takes a ``mode``).
    **init
        More arguments of the explorer (plain data, e.g. ``seed``).

    Returns
    -------
    StaticStates
    """
    cls, grid = explorer_class(name), static_grid(name, mode)
    args = {"mode": mode} if "mode" in inspect.signature(cls).parameters else {}

    def compute() -> dict[str, np.ndarray]:
        s = precompute(cls(**args, **init), grid)
        return {
            "png": np.frombuffer(b"".join(s.frames), np.uint8),
            "ends": np.cumsum([len(f) for f in s.frames]),
            "status": np.array(s.status, dtype=str),
            "errors": np.array(s.errors),
            "start": np.array(s.start),
        }

    params = {"explorer": name, "mode": mode, "init": init, "grid": {k: list(v) for k, v in grid.items()}}
    a = cached(f"static_{name}_{mode}", params, compute)
    png, ends = a["png"].tobytes(), a["ends"].tolist()
    frames = tuple(png[lo:hi] for lo, hi in zip([0, *ends[:-1]], ends))
    controls = {c.name: c for c in cls.controls}
    axes = tuple((controls[key], values) for key, values in grid.items())
    status, errors = tuple(map(str, a["status"])), tuple(map(bool, a["errors"]))
    return StaticStates(axes, frames, status, errors, tuple(a["start"].tolist()))


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def static_explorer_html(states: StaticStates) -> str:
    """The HTML of a twin: form controls, image, status line, caption and the states (see the module doc).

    Parameters
    ----------
    states : StaticStates
        The precomputed states.

    Returns
    -------
    str
        A ``<div class="static-explorer">``; the pictures are data URIs (the build writes them to files).
    """
    esc, shape, start = html.escape, states.shape, states.start
    index = int(np.ravel_multi_index(start, shape))
    fields = []
    for axis, (control, values) in enumerate(states.axes):
        label, shown, k = esc(control.description), [esc(_shown(v)) for v in values], start[axis]
        if control.options is None:  # a slider over the grid's indices, its value shown beside it
            field = (
                f'<input type="range" data-axis="{axis}" min="0" max="{len(values) - 1}" step="1" value="{k}" '
                f'aria-valuetext="{shown[k]}"> <output>{shown[k]}</output>'
            )
        else:
            options = "".join(f'<option value="{i}"{" selected" * (i == k)}>{v}</option>' for i, v in enumerate(shown))
            field = f'<select data-axis="{axis}">{options}</select>'
        fields.append(f'<label class="static-explorer-control"><span>{label}</span> {field}</label>')
    data = {
        "shape": shape,
        "labels": [[_shown(v) for v in values] for _, values in states.axes],
        "frames": ["data:image/png;base64," + base64.b64encode(f).decode("ascii") for f in states.frames],
        "status": states.status,
        "errors": [k for k, e in enumerate(states.errors) if e],
    }
    width, height = (int.from_bytes(states.frames[index][at : at + 4], "big") for at in (16, 20))  # PNG header
    names = " × ".join(esc(c.description) for c, _ in states.axes)
    error = " static-explorer-error" * states.errors[index]
    script = json.dumps(data).replace("</", "<\\/")  # no "</script>" inside the script
    return (
        '<div class="static-explorer">\n'
        f'<div class="static-explorer-controls">{"".join(fields)}</div>\n'
        f'<img class="static-explorer-image" src="{data["frames"][index]}" width="{width}" height="{height}" '
        f'alt="The explorer for the state chosen above: {esc(states.status[index])}">\n'
        f'<p class="static-explorer-status{error}" aria-live="polite">{esc(states.status[index])}</p>\n'
        f'<p class="static-explorer-caption">{" × ".join(map(str, shape))} states ({names}) precomputed when the '
        "book was built; every other control, and every value in between, is live in Jupyter: run "
        '<code>make lab</code> and open this chapter<span class="static-explorer-launch"></span>.</p>\n'
        f'<script type="application/json" class="static-explorer-states">{script}'
        "</script>\n</div>"
    )


def static_explorer(name: str, mode: str = "fast", **init):
    """A chapter's twin of its live explorer ``name``, for the static page; None in a live Jupyter session.

    In a live session the live explorer next to it recomputes every state, and nothing is precomputed.

    Parameters
    ----------
    name : str
        Explorer function, e.g. ``"regimes_explorer"``.
    mode : {"fast", "full"}
        Setting of the grid and of the explorer.
    **init
        More arguments of the explorer (plain data, e.g. ``seed``).

    Returns
    -------
    IPython.display.HTML or None
        The twin (:func:`static_explorer_html` of :func:`static_states`), which Jupyter displays.
    """
    if live_widgets():
        return None
    from IPython.display import HTML

    return HTML(static_explorer_html(static_states(name, mode, **init)))
