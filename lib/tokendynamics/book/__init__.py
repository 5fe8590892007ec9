"""The book layer: everything that exists for the chapters rather than for the mathematics.

Experiment parameters (:mod:`.experiments`), cached results (:mod:`.cache`), the plotting style
and figure helpers (:mod:`.plotting`, :mod:`.gaussian_plots`, :mod:`.kuramoto_plots`,
:mod:`.highdim_plots`), the official figure protocols of paper 1 (:mod:`.gaussian_figures`) and
the chapters' explorers (:mod:`.explorers`, one module per chapter, on the framework :mod:`.widgets`),
their kernel-free twins on the static pages (:mod:`.static_explorers`) and the chapter studies
(:mod:`.studies`: surveys, searches, case recipes and rate fits). The mathematics
(``tokendynamics.*`` outside this package) never imports from here.
"""
