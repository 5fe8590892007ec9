r"""A transformer of finite depth at initialisation: L residual attention blocks of step h = T/L, with
optional LayerNorm, a random MLP and fresh weights per block (numpy only).

.. math::
   \text{None:}\quad & x \leftarrow x + h\,(\Gamma_k(x) + F_k(x)),\\
   \text{pre:}\quad & x \leftarrow x + h\,(\Gamma_k(\mathrm{LN}\,x) + F_k(\mathrm{LN}\,x)),\\
   \text{post:}\quad & x \leftarrow \mathrm{LN}\big(x + h\,(\Gamma_k(x) + F_k(x))\big),\\
   \text{sphere:}\quad & x \leftarrow y/|y|,\quad y = x + h\,(\Gamma_k(x) + F_k(x)),

with :math:`\Gamma_k` the attention field of block k, :math:`F_k` its MLP, :math:`\mathrm{LN}` a LayerNorm
without gain or bias.

References
----------
Residual networks as ODE schemes: W. E (2017); R. T. Q. Chen et al. (arXiv:1806.07366); M. E. Sander, P.
Ablin, G. Peyré (arXiv:2205.14612); pre- and post-LN: R. Xiong et al. (arXiv:2002.04745). Book:
``chapters/08_transformer.md``, equation (eq-tf-block) [D].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .attention import Attention, require_layer, velocity
from .errors import BlowUpError, NonFiniteError
from .validation import (
    MAX_ITERATIONS,
    real_array,
    require_memory,
    validate_choice,
    validate_count,
    validate_instance,
    validate_positive,
    validate_rng,
    validate_tokens,
)

__all__ = ["NORMS", "LAYER_NORM_EPS", "MLP", "layer_norm", "forward"]

#: The normalisations of :func:`forward` (None: no normalisation).
NORMS = (None, "pre", "post", "sphere")
#: The :math:`\epsilon` of LayerNorm (PyTorch's default).
LAYER_NORM_EPS = 1e-5
_GAINS = {"relu": 2.0, "tanh": 1.0}  # the He and LeCun variances of the first matrix, times 1/d


def layer_norm(X, eps: float = LAYER_NORM_EPS) -> np.ndarray:
    r"""LayerNorm of each token over its features, without gain or bias (its output lies, up to
    :math:`\epsilon`, on the sphere of radius :math:`\sqrt d` of :math:`\mathbf 1^\perp`).

    .. math:: \mathrm{LN}\,x = \frac{x-\bar x\,\mathbf 1}{\sqrt{\sigma^2(x)+\epsilon}},\qquad
       \bar x=\frac1d\sum_a x_a,\quad \sigma^2(x)=\frac1d\sum_a (x_a-\bar x)^2 .

    Parameters
    ----------
    X, eps
        Tokens (..., d), d >= 2, and :math:`\epsilon > 0`.

    Returns
    -------
    array (..., d)

    References
    ----------
    J. L. Ba, J. R. Kiros, G. E. Hinton, arXiv:1607.06450; book: ``chapters/08_transformer.md``, (eq-tf-block).
    """
    X = real_array(X, "X")
    if X.ndim < 1 or X.shape[-1] < 2 or not np.all(np.isfinite(X)):
        raise ValueError(f"X must hold finite tokens of dimension d >= 2 for LayerNorm, got shape {X.shape}")
    eps = validate_positive(eps, "eps")
    Y = X - X.mean(axis=-1, keepdims=True)
    return Y / np.sqrt(np.mean(Y * Y, axis=-1, keepdims=True) + eps)


@dataclass(frozen=True)
class MLP:
    r"""A random two-layer feed-forward block at initialisation, :math:`F(x)=s\,W_2\,\varphi(W_1x)` (no biases).

    :math:`W_1` (m, d) has entries :math:`N(0, g/d)` (:math:`g=2` for ReLU, 1 for tanh), :math:`W_2` (d, m)
    :math:`N(0, 1/m)`: for ReLU :math:`\mathbb E|F(x)|^2\approx s^2|x|^2`.

    Parameters
    ----------
    width, strength, activation
        The hidden width m >= 1, s >= 0 (0: no MLP), and :math:`\varphi`, "relu" or "tanh".

    References
    ----------
    K. He et al., ICCV 2015 (arXiv:1502.01852), the variance rule; book: ``chapters/08_transformer.md``.
    """

    width: int
    strength: float
    activation: str = "relu"

    def __post_init__(self):
        object.__setattr__(self, "width", validate_count(self.width, "width"))
        object.__setattr__(self, "strength", validate_positive(self.strength, "strength", allow_zero=True))
        validate_choice(self.activation, "activation", tuple(_GAINS))

    def sample(self, d: int, rng=None) -> tuple[np.ndarray, np.ndarray]:
        """Draw the weights :math:`(W_1, W_2)` for tokens of dimension d.

        Parameters
        ----------
        d, rng
            Token dimension, and a seed or generator.

        Returns
        -------
        W1, W2 : arrays (width, d) and (d, width)
        """
        d = validate_count(d, "d")
        rng = validate_rng(rng)
        W1 = rng.standard_normal((self.width, d)) * np.sqrt(_GAINS[self.activation] / d)
        W2 = rng.standard_normal((d, self.width)) / np.sqrt(self.width)
        return W1, W2

    def __call__(self, X, weights: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """:math:`F(x_i)` for every row of X.

        Parameters
        ----------
        X, weights
            Tokens (n, d), and :math:`(W_1, W_2)` from :meth:`sample`.

        Returns
        -------
        array (n, d)
        """
        W1, W2 = weights
        H = X @ W1.T
        H = np.maximum(H, 0.0) if self.activation == "relu" else np.tanh(H)
        return self.strength * (H @ W2.T)


def _layers(layer, L: int, d: int) -> list[Attention]:
    if isinstance(layer, Attention):
        layers = [layer]
    elif isinstance(layer, Sequence) and not isinstance(layer, str):
        layers = list(layer)
        if len(layers) != L:
            raise ValueError(f"layer must be one Attention or a sequence of L = {L} of them, got {len(layers)}")
    else:
        raise TypeError(f"layer must be an Attention or a sequence of L of them, got {type(layer).__name__}")
    for k, lay in enumerate(layers):
        if require_layer(lay, f"layer[{k}]").d != d:
            raise ValueError(f"X0 has tokens of dimension {d} but layer[{k}] has d = {lay.d}")
    return layers


def forward(X0, layer, T: float, L: int, *, norm: str | None = None, mlp: MLP | None = None, rng=None) -> np.ndarray:
    r"""The tokens after each of L residual blocks of step T/L (the rule of the module doc), with tied weights
    (one layer and one MLP draw) or fresh ones (block k uses ``layer[k]`` and its own MLP draw).

    Parameters
    ----------
    X0, layer
        Input tokens (n, d) (unit rows for ``norm="sphere"``), never modified; one Attention (tied weights)
        or a sequence of L (fresh weights).
    T, L
        Depth T > 0 of the ODE the network discretises, and the number of blocks L >= 1.
    norm : {None, "pre", "post", "sphere"}
        LayerNorm inside the residual branch (pre-LN), after the sum (post-LN), or the unit-norm retraction.
    mlp, rng
        A random feed-forward :class:`MLP` added in each residual branch, and the seed of its weights.

    Returns
    -------
    array (L + 1, n, d)
        The input and the tokens after each block; an overflow raises ``BlowUpError`` at the block's depth.

    References
    ----------
    Book: ``chapters/08_transformer.md``, equation (eq-tf-block) [D].

    Examples
    --------
    >>> import numpy as np
    >>> from tokendynamics import Attention
    >>> layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    >>> forward(np.eye(2), layer, 1.0, 4, norm="sphere").shape
    (5, 2, 2)
    """
    X = validate_tokens(X0, name="X0").copy()
    n, d = X.shape
    T, L = validate_positive(T, "T"), validate_count(L, "L")
    require_memory((L + 1) * n * d, f"forward with L = {L} blocks of {n} x {d} tokens")
    validate_count(L, "L", maximum=MAX_ITERATIONS)  # a work budget, after the memory check
    if norm is not None:
        validate_choice(norm, "norm", NORMS[1:])
    if norm in ("pre", "post") and d < 2:
        raise ValueError(f"LayerNorm needs tokens of dimension d >= 2, X0 has d = {d}")
    if norm == "sphere" and np.max(np.abs(np.linalg.norm(X, axis=1) - 1)) > 1e-6:
        raise ValueError("norm='sphere' needs unit-norm tokens in X0 (use normalize_rows)")
    layers = _layers(layer, L, d)
    if mlp is not None:
        validate_instance(mlp, MLP, "mlp", "an MLP (or None)")
        require_memory(3 * mlp.width * (n + d), f"an MLP of width = {mlp.width}")
        gen = validate_rng(rng)
        weights = [mlp.sample(d, gen) for _ in layers]
    elif rng is not None:
        raise ValueError("rng seeds the MLP's weights: give mlp, or drop rng")
    h = T / L
    out = np.empty((L + 1, n, d))
    out[0] = X
    for k in range(L):
        lay = layers[k % len(layers)]
        Z = layer_norm(X) if norm == "pre" else X
        try:
            U = velocity(Z, lay)
        except NonFiniteError as err:
            raise BlowUpError((k + 1) * h, k * h, f"the attention overflowed in block {k + 1} of {L}: {err}") from err
        if mlp is not None:
            U = U + mlp(Z, weights[k % len(weights)])
        Y = X + h * U
        if not np.all(np.isfinite(Y)):
            raise BlowUpError((k + 1) * h, k * h, f"the tokens overflowed in block {k + 1} of {L}")
        if norm == "post":
            Y = layer_norm(Y)
        elif norm == "sphere":
            Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
        out[k + 1] = X = Y
    return out
