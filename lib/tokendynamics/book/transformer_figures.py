r"""Book layer of chapter 08 (from the ODE to a transformer): the studies behind its figures.

Every study calls :func:`tokendynamics.transformer.forward` (the network) and
:func:`tokendynamics.particles.simulate` (the ODE it discretises) on one setting of
``experiments.settings("transformer")``. Two conventions keep the network and the papers' sphere
model comparable:

* tokens start on the unit sphere of :math:`\mathbf 1^\perp` (:func:`centred_sphere`), where
  LayerNorm leaves them unchanged up to the factor :math:`\sqrt d`;
* the LayerNorm modes run on :math:`\sqrt d\,U_0` with the score matrix :math:`A/d` (Q and K each
  scaled by :math:`1/\sqrt d`), so that their scores are the sphere model's
  :math:`\beta\langle u_i, Au_j\rangle`; :func:`network` returns the unit directions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import metrics
from ..attention import Attention
from ..docstrings import fill_doc
from ..ensembles import recipe_matrices
from ..gaussian import covariance_eigenvalues, empirical_moments, isotropic_covariance
from ..particles import normalize_rows, sample_gaussian, sample_sphere, simulate
from ..transformer import MLP, forward

__all__ = [
    "NORM_LABELS",
    "NORM_COLORS",
    "centred_sphere",
    "antithetic_gaussian",
    "identity_layer",
    "gaussian_layers",
    "clustering_layers",
    "network",
    "sphere_ode",
    "slope",
    "first_single",
    "depth_study",
    "norm_study",
    "mlp_study",
    "weights_study",
    "rank_study",
]

#: The parameter every study takes (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {"setting": 'p : dict\n    One setting, ``settings("transformer", mode)``.'}

NORM_LABELS = {"none": "no norm", "pre": "pre-LN", "post": "post-LN", "sphere": "sphere retraction"}
NORM_COLORS = {"none": "#7a7a7a", "pre": "#d95f02", "post": "#1b9e77", "sphere": "#1f5fa8", "ode": "black"}


def centred_sphere(n: int, d: int, seed: int) -> np.ndarray:
    r"""n tokens uniform on the unit sphere of the hyperplane :math:`\mathbf 1^\perp` of :math:`\mathbb R^d`.

    Parameters
    ----------
    n, d : int
        Number and dimension of the tokens (d >= 2).
    seed : int
        Seed.

    Returns
    -------
    array (n, d)
        Unit rows with zero mean over their features.
    """
    U = sample_sphere(n, d, seed)
    return normalize_rows(U - U.mean(axis=1, keepdims=True))


def identity_layer(d: int, beta: float) -> Attention:
    """Softmax attention with :math:`Q=K=V=I` (the papers' clustering model).

    Parameters
    ----------
    d : int
        Dimension.
    beta : float
        Inverse temperature.

    Returns
    -------
    Attention
    """
    return Attention("softmax", A=np.eye(d), V=np.eye(d), beta=beta)


def gaussian_layers(d: int, beta: float, count: int, rng) -> list[Attention]:
    """``count`` softmax layers of the phase-diagram chapter's Gaussian recipe (:math:`Q, K` entries
    :math:`N(0, 1/d)`, :math:`V=I`; :func:`~tokendynamics.ensembles.recipe_matrices`).

    Parameters
    ----------
    d : int
        Dimension.
    beta : float
        Inverse temperature.
    count : int
        Number of layers.
    rng : int or numpy.random.Generator
        Seed.

    Returns
    -------
    list of Attention
    """
    M = recipe_matrices("gaussian", d, count, rng)
    return [Attention("softmax", Q=M["Q"][k], K=M["K"][k], V=M["V"][k], beta=beta) for k in range(count)]


def clustering_layers(d: int, rank: int, beta: float, count: int, rng) -> list[Attention]:
    r"""``count`` softmax layers :math:`A=-P`, :math:`P` the orthogonal projection on a uniformly random
    subspace of dimension r, and :math:`V=I`: the Gaussian chapter's clustering case
    (:math:`A+A^\top\preceq0`), whose covariance tends to rank :math:`\dim\ker(A+A^\top)=d-r`. The
    mean score matrix over draws is :math:`-(r/d)I`.

    Parameters
    ----------
    d, rank : int
        Dimension and the rank r of the projection.
    beta : float
        Inverse temperature.
    count : int
        Number of layers.
    rng : int or numpy.random.Generator
        Seed.

    Returns
    -------
    list of Attention
    """
    rng = np.random.default_rng(rng)
    out = []
    for _ in range(count):
        Q = np.linalg.qr(rng.standard_normal((d, rank)))[0]  # orthonormal columns: a uniform r-plane
        out.append(Attention("softmax", A=-Q @ Q.T, V=np.eye(d), beta=beta))
    return out


def network(U0, layer, T: float, L: int, norm: str = "none", mlp: MLP | None = None, rng=None) -> np.ndarray:
    r"""Unit directions of the tokens after each block of :func:`~tokendynamics.transformer.forward`.

    ``norm`` is ``"none"``, ``"pre"``, ``"post"`` or ``"sphere"``. The LayerNorm modes run on
    :math:`\sqrt d\,U_0` with :math:`A/d` (module doc); the others on :math:`U_0`.

    Parameters
    ----------
    U0 : array (n, d)
        Unit tokens of :math:`\mathbf 1^\perp` (:func:`centred_sphere`).
    layer : Attention or list of Attention
        Tied or fresh weights, in the sphere model's scale.
    T : float
        Depth.
    L : int
        Blocks.
    norm : str
        The normalisation.
    mlp : MLP, optional
        The feed-forward block.
    rng : int, optional
        Seed of the MLP.

    Returns
    -------
    array (L + 1, n, d)
    """
    if norm in ("pre", "post"):
        d = U0.shape[1]
        scale = lambda lay: lay.with_(A=lay.A / d)  # noqa: E731
        layer = scale(layer) if isinstance(layer, Attention) else [scale(lay) for lay in layer]
        Y = forward(np.sqrt(d) * U0, layer, T, L, norm=norm, mlp=mlp, rng=rng)
    else:
        Y = forward(U0, layer, T, L, norm=None if norm == "none" else norm, mlp=mlp, rng=rng)
    return normalize_rows(Y)


def sphere_ode(U0, layer: Attention, T: float, dt: float):
    """The sphere model's ODE from ``U0`` (fourth-order Runge–Kutta with the retraction).

    Parameters
    ----------
    U0 : array (n, d)
        Unit tokens.
    layer : Attention
        The layer.
    T, dt : float
        Depth and step.

    Returns
    -------
    Trajectory
        Every step stored.
    """
    return simulate(U0, layer, T, dt=dt, method="rk4", sphere=True)


def slope(x, y) -> float:
    """Least-squares slope of :math:`\\log y` against :math:`\\log x`.

    Parameters
    ----------
    x, y : array
        Positive numbers.

    Returns
    -------
    float
    """
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def first_single(t, X, threshold: float = 0.999) -> float:
    """The first stored depth at which the tokens form one cluster (``inf`` if never).

    Parameters
    ----------
    t : array (m,)
        Depths.
    X : array (m, n, d)
        Unit tokens.
    threshold : float
        Link threshold of :func:`~tokendynamics.metrics.count_clusters`.

    Returns
    -------
    float
    """
    one = np.nonzero(metrics.count_clusters(X, threshold) == 1)[0]
    return float(t[one[0]]) if one.size else float("inf")


def _distance(X, Y) -> float:
    return float(np.max(np.linalg.norm(X - Y, axis=-1)))


@fill_doc(_DOC)
def depth_study(p: dict) -> dict[str, Any]:
    """Section 1: L blocks against the ODE at depth T, on the sphere and in the Euclidean setting.

    Parameters
    ----------
    %(setting)s

    Returns
    -------
    dict
        ``Ls``; ``sphere`` and ``euclid`` distances at depth T per L; ``euler_gap`` (the network
        without norm against the Euler scheme of :func:`~tokendynamics.particles.simulate`); the
        order parameter curves ``R1`` per L in
        ``p["depths"]`` and ``R1_ode``; clustering depths per cloud (``t_single`` per L, ``t_single_ode``).
    """
    T, dt = p["T"], p["ode_dt"]
    Ls = sorted(set(p["depths"]) | set(p["fit_depths"]))
    layer = identity_layer(p["d"], p["beta"])
    U0 = centred_sphere(p["n"], p["d"], p["seed"])
    ode = sphere_ode(U0, layer, T, dt)
    e = p["euclid"]
    X0 = antithetic_gaussian(e["n"], e["d"], e["seed"])
    lay_e = clustering_layers(e["d"], e["rank"], e["beta"], 1, e["layer_seed"])[0]
    ref_e = simulate(X0, lay_e, e["T_depth"], dt=e["ode_dt"], method="rk4").final
    out: dict[str, Any] = {"Ls": np.array(Ls), "sphere": [], "euclid": [], "R1": {}, "t_ode": ode.t}
    for L in Ls:
        Y = forward(U0, layer, T, L, norm="sphere")
        out["sphere"].append(_distance(Y[-1], ode.final))
        out["euclid"].append(_distance(forward(X0, lay_e, e["T_depth"], L)[-1], ref_e))
        if L in p["depths"]:
            out["R1"][L] = metrics.order_parameters(Y)[0]
    out["R1_ode"] = metrics.order_parameters(ode.X)[0]
    L0 = p["depths"][-1]
    euler = simulate(X0, lay_e, e["T_depth"], dt=e["T_depth"] / L0, method="euler").X
    out["euler_gap"] = _distance(forward(X0, lay_e, e["T_depth"], L0), euler)
    out["t_single"] = {L: [] for L in p["depths"]}
    out["t_single_ode"] = []
    for c in range(p["clouds"]):
        Uc = centred_sphere(p["n"], p["d"], p["seed"] + c)
        oc = sphere_ode(Uc, layer, T, dt)
        out["t_single_ode"].append(first_single(oc.t, oc.X))
        for L in p["depths"]:
            out["t_single"][L].append(first_single(np.linspace(0, T, L + 1), forward(Uc, layer, T, L, norm="sphere")))
    for key in ("sphere", "euclid"):
        out[key] = np.array(out[key])
    return out


def antithetic_gaussian(n: int, d: int, seed: int) -> np.ndarray:
    """n/2 standard Gaussian tokens and their opposites: the mean is exactly zero, and stays zero
    under any layer whose field is odd in the tokens (softmax with :math:`V=I`, quadratic scores).

    Parameters
    ----------
    n, d : int
        Number (even) and dimension of the tokens.
    seed : int
        Seed.

    Returns
    -------
    array (n, d)
    """
    Z = sample_gaussian(n // 2, np.zeros(d), np.eye(d), rng=seed)
    return np.vstack([Z, -Z])


@fill_doc(_DOC)
def norm_study(p: dict) -> dict[str, Any]:
    r"""Section 2: pre-LN, post-LN and the sphere retraction against the sphere ODE.

    Parameters
    ----------
    %(setting)s

    Returns
    -------
    dict
        ``Ls``; per mode the distance to the ODE at depth T; for pre-LN also ``tau`` (its sphere
        clock :math:`\tau=h\sum_k\operatorname{mean}_i 1/r_i^{(k)}`, :math:`r=|x|/\sqrt d`), the
        distance to the ODE at :math:`\tau` and the radius at T; the order-parameter curves at
        ``p["norm_L"]`` blocks (``R1``) and the ODE's.
    """
    T, d = p["T"], p["d"]
    layer = identity_layer(d, p["beta"])
    U0 = centred_sphere(p["n"], d, p["seed"])
    ode = sphere_ode(U0, layer, T, p["ode_dt"])
    Ls = np.array(sorted(set(p["depths"]) | set(p["fit_depths"])))
    out: dict[str, Any] = {"Ls": Ls, "t_ode": ode.t, "R1_ode": metrics.order_parameters(ode.X)[0], "R1": {}}
    for norm in ("sphere", "post", "pre"):
        out[norm] = np.array([_distance(network(U0, layer, T, L, norm)[-1], ode.final) for L in Ls])
    scaled = layer.with_(A=layer.A / d)
    taus, at_tau = [], []
    for L in Ls:
        Y = forward(np.sqrt(d) * U0, scaled, T, L, norm="pre")
        r = np.linalg.norm(Y, axis=-1) / np.sqrt(d)
        tau = T / L * np.sum(np.mean(1 / r[:-1], axis=1))
        taus.append(tau)
        at_tau.append(_distance(normalize_rows(Y[-1]), ode.at(tau)))
        if L == p["norm_L"]:
            out["radius"] = r
            out["tau_curve"] = np.concatenate([[0.0], np.cumsum(T / L * np.mean(1 / r[:-1], axis=1))])
    out["tau"], out["pre_at_tau"] = np.array(taus), np.array(at_tau)
    L = p["norm_L"]
    for norm in ("sphere", "post", "pre"):
        out["R1"][norm] = metrics.order_parameters(network(U0, layer, T, L, norm))[0]
    out["post_sphere_gap"] = _distance(network(U0, layer, T, L, "post"), network(U0, layer, T, L, "sphere"))
    return out


@fill_doc(_DOC)
def mlp_study(p: dict) -> dict[str, Any]:
    """Section 3: post-LN networks with a random MLP of growing strength (tied weights), over clouds.

    Parameters
    ----------
    %(setting)s

    Returns
    -------
    dict
        ``strengths``; per activation, arrays (strengths, clouds) of the first depth of one cluster
        (``t_single``), the clusters at depth T (``clusters``) and whether they are two antipodal ones.
    """
    m, T = p["mlp"], p["T"]
    layer = identity_layer(p["d"], p["beta"])
    t = np.linspace(0, T, m["L"] + 1)
    out: dict[str, Any] = {"strengths": np.array(m["strengths"], dtype=float)}
    for act in m["activations"]:
        t1, counts, anti = (np.zeros((len(m["strengths"]), p["clouds"])) for _ in range(3))
        for i, s in enumerate(m["strengths"]):
            for c in range(p["clouds"]):
                U0 = centred_sphere(p["n"], p["d"], p["seed"] + c)
                Y = network(U0, layer, T, m["L"], "post", MLP(m["width"], s, act), m["seed"] + c)
                t1[i, c] = first_single(t, Y)
                res = metrics.cluster_outcomes(Y[-1])
                counts[i, c], anti[i, c] = res["clusters"], res["antipodal"]
        out[act] = {"t_single": t1, "clusters": counts, "antipodal": anti.astype(bool)}
    return out


@fill_doc(_DOC)
def weights_study(p: dict) -> dict[str, Any]:
    """Section 4 (sphere): tied against fresh Gaussian weights over clouds, and how two fresh draws differ.

    Parameters
    ----------
    %(setting)s

    Returns
    -------
    dict
        ``t`` (block depths), ``single`` per "tied"/"fresh": (clouds, L + 1) booleans (one cluster);
        ``Ls`` and ``spread`` (root-mean-square distance between two fresh draws at depth
        ``fluct_T``, over the tokens and the pairs of draws) and ``spread_tied`` (the same for two
        tied draws).
    """
    w = p["weights"]
    T, L, d = w["T"], w["L"], w["d"]
    single: dict[str, list] = {"tied": [], "fresh": []}
    for c in range(w["clouds"]):
        X0 = sample_sphere(w["n"], d, w["seed"] + c)
        layers = gaussian_layers(d, w["beta"], L + 1, w["layer_seed"] + c)
        for name, lay in (("tied", layers[0]), ("fresh", layers[1:])):
            single[name].append(metrics.cluster_outcomes(forward(X0, lay, T, L, norm="sphere"))["single"])
    X0 = sample_sphere(w["n"], d, w["seed"])
    spread, spread_tied = [], []
    for Lf in w["fluct_depths"]:
        sq, sq_tied = [], []
        for k in range(w["pairs"]):
            a, b = (gaussian_layers(d, w["beta"], Lf, [w["layer_seed"], Lf, k, j]) for j in (0, 1))
            Ya, Yb = (forward(X0, lay, w["fluct_T"], Lf, norm="sphere")[-1] for lay in (a, b))
            sq.append(np.mean(np.sum((Ya - Yb) ** 2, axis=1)))
            Za, Zb = (forward(X0, lay[0], w["fluct_T"], Lf, norm="sphere")[-1] for lay in (a, b))
            sq_tied.append(np.mean(np.sum((Za - Zb) ** 2, axis=1)))
        spread.append(np.sqrt(np.mean(sq)))
        spread_tied.append(np.sqrt(np.mean(sq_tied)))
    return {
        "t": np.linspace(0, T, L + 1),
        "single": {k: np.array(v) for k, v in single.items()},
        "Ls": np.array(w["fluct_depths"]),
        "spread": np.array(spread),
        "spread_tied": np.array(spread_tied),
    }


@fill_doc(_DOC)
def rank_study(p: dict) -> dict[str, Any]:
    r"""Section 4 (Euclidean): the covariance spectrum of Gaussian tokens through tied and fresh blocks.

    Parameters
    ----------
    %(setting)s

    Returns
    -------
    dict
        ``t``; ``tied`` and ``fresh``: eigenvalues (L + 1, d) of the tokens' covariance after each
        block; ``tied_ode`` and ``mean_ode``: the Gaussian closed form
        (:func:`~tokendynamics.gaussian.isotropic_covariance`) for the tied layer and for the mean
        layer :math:`\bar A=-(r/d)I`; ``kernel`` = d - r.
    """
    e = p["euclid"]
    X0 = antithetic_gaussian(e["n"], e["d"], e["seed"])
    layers = clustering_layers(e["d"], e["rank"], e["beta"], e["L"] + 1, e["layer_seed"])
    t = np.linspace(0, e["T"], e["L"] + 1)
    spectrum = lambda Y: covariance_eigenvalues(empirical_moments(Y)[1])  # noqa: E731
    _, C0 = empirical_moments(X0)
    mean_layer = Attention("softmax", A=-(e["rank"] / e["d"]) * np.eye(e["d"]), V=np.eye(e["d"]), beta=e["beta"])
    return {
        "t": t,
        "tied": spectrum(forward(X0, layers[0], e["T"], e["L"])),
        "fresh": spectrum(forward(X0, layers[1:], e["T"], e["L"])),
        "tied_ode": covariance_eigenvalues(isotropic_covariance(C0, layers[0], t)),
        "mean_ode": covariance_eigenvalues(isotropic_covariance(C0, mean_layer, t)),
        "kernel": e["d"] - e["rank"],
    }
