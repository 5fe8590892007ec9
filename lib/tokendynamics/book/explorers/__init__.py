"""The chapters' live explorers: one module per chapter, on the framework of :mod:`tokendynamics.book.widgets`.

* chapter 01 (well-posedness): :func:`variants_explorer`, update :func:`variants_update`
  (module ``explorers.well_posedness``);
* chapter 02 (Gaussians): :func:`cone_explorer`, update :func:`cone_update`
  (``explorers.gaussian_preservation``);
* chapter 03 (gradient flow): :func:`energy_explorer`, update :func:`energy_update`
  (``explorers.gradient_flow``);
* chapter 04 (Kuramoto reduction): :func:`regimes_explorer`, update :func:`regimes_update`
  (``explorers.kuramoto_reduction``);
* chapter 06 (high dimension): :func:`highdim_explorer`, update :func:`highdim_update`
  (``explorers.high_dimensional``);
* chapter 08 (from the ODE to a transformer): :func:`transformer_explorer`, update
  :func:`transformer_update` (``explorers.transformer``).

A chapter's explorer cell is one call, e.g. ``variants_explorer(mode)``: in a live Jupyter session it
returns the explorer, which Jupyter displays (controls, status line, figure); in the headless book
build (:func:`~tokendynamics.book.plotting.live_widgets` false) it builds nothing and returns None
(every such function is made by :func:`~tokendynamics.book.widgets.live_explorer`).
Each ``*_update`` function is the library computation of one move of a control (what the tests and
``benchmarks/bench_explorers.py`` call); each ``*Explorer`` class draws it in place and also makes
the chapter's static stand-in (:meth:`~tokendynamics.book.widgets.Explorer.animate`). Nothing here
is mathematics: every number comes from the core modules.
"""

from .gaussian_preservation import ConeExplorer, cone_explorer, cone_update
from .gradient_flow import EnergyExplorer, energy_explorer, energy_update
from .high_dimensional import HighdimExplorer, highdim_explorer, highdim_update
from .kuramoto_reduction import RegimesExplorer, regimes_explorer, regimes_update
from .transformer import TransformerExplorer, transformer_explorer, transformer_update
from .well_posedness import VariantsExplorer, variants_explorer, variants_update

__all__ = [
    "variants_update",
    "VariantsExplorer",
    "variants_explorer",
    "cone_update",
    "ConeExplorer",
    "cone_explorer",
    "energy_update",
    "EnergyExplorer",
    "energy_explorer",
    "regimes_update",
    "RegimesExplorer",
    "regimes_explorer",
    "highdim_update",
    "HighdimExplorer",
    "highdim_explorer",
    "transformer_update",
    "TransformerExplorer",
    "transformer_explorer",
]
