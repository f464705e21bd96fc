"""ATen -> JAX lowering rules: pure functions of jax arrays and static Python values.

Importing this package registers every rule family.
"""

from . import (  # noqa: F401  (registration side effects)
    activations,
    amp,
    attention,
    conv,
    creation,
    creation_ranges,
    elementwise,
    fft,
    foreach,
    histogram,
    indexing,
    indexing_compressed,
    indexing_reduce,
    indexing_select,
    linalg,
    linalg_factor,
    linalg_householder,
    linalg_ldl,
    nested,
    nn,
    nn_backward,
    nn_batch_norm,
    nn_batch_norm_sync,
    nn_bilinear,
    nn_ctc,
    nn_embedding_bag,
    nn_random,
    nn_rnn,
    optim_fused,
    pooling_fractional,
    quantize,
    random,
    random_gradients,
    reduction,
    reduction_hash,
    special,
    special_bessel,
    special_polynomials,
    upsample_aa,
    views,
)
from .registry import LOWERINGS, Lowering, lowering

__all__ = ["LOWERINGS", "Lowering", "lowering"]
