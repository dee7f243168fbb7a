"""The blocked direct loops (`codegen.lowered.conv.blocked`): packed float32 filters of
whole panels, read from the image in place with their input channels in chunks, match a
float64 reference over batches, image sizes, filter shapes (one tap to 5x5, channels in
one chunk or several), strides, padding and filter-row dilation drawn by hypothesis (a
column dilation takes the gemm instead); a frozen function's convolution with a fused
bias, residual and ReLU runs them and gives the unfused ops' numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered.conv import blocked
from stageflow.primitives import prepacked
from tests.codegen.test_lowered_conv import conv_reference, run_compiled, values

pytestmark = pytest.mark.skipif(
    not blocked.available(np.dtype(np.float32)),
    reason="the blocked loops serve CPUs with AVX-512")

# (kh, kw, C, O): a chunk and a part of one, several chunks, one panel at the end, 5x5
FILTERS = [(3, 3, 5, 64), (2, 3, 40, 96), (5, 5, 3, 32), (3, 1, 70, 160)]
pairs = st.tuples(st.integers(1, 2), st.integers(1, 2))


@settings(max_examples=8, deadline=None)  # each geometry compiles an op of its own
@given(filter_shape=st.sampled_from(FILTERS), batch=st.integers(1, 3),
       size=st.tuples(st.integers(1, 9), st.integers(1, 9)), strides=pairs,
       dilations=st.sampled_from([(1, 1), (2, 1), (1, 2)]),
       padding=st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)),
                         st.tuples(st.integers(0, 2), st.integers(0, 2))))
def test_the_blocked_loops_match_the_reference(filter_shape, batch, size, strides, dilations,
                                               padding):
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (filter_shape[axis] - 1) * dilations[axis] + 1)
    x = values((batch, *size, filter_shape[2]), np.float32)
    w = values(filter_shape, np.float32, seed=1) / 10
    params = {"strides": strides, "padding": padding, "dilations": dilations}
    got = run_compiled("conv2d_prepacked", [x, prepacked.pack(w)], True,
                       filter_shape=filter_shape, **params)
    np.testing.assert_allclose(got, conv_reference(x, w, strides, padding, dilations),
                               rtol=1e-4, atol=1e-4)


def test_a_frozen_convolution_runs_them_with_its_fused_epilogue():
    """ResNet's 3x3 layer at a 7x7 image: tiles of six pixels run across the rows' ends,
    and the cores take blocks of output channels."""
    rng = np.random.default_rng(0)
    w = sf.Variable(rng.standard_normal((3, 3, 64, 128)).astype(np.float32) / 20)
    bias = sf.Variable(rng.standard_normal(128).astype(np.float32))

    @sf.function
    def layer(x, skip):
        return sf.nn.relu(sf.nn.conv2d(x, w, 1, "SAME") + bias + skip)

    x = rng.standard_normal((2, 7, 7, 64)).astype(np.float32)
    skip = rng.standard_normal((2, 7, 7, 128)).astype(np.float32)
    frozen = layer.freeze(x, skip)
    assert blocked.BlockedLoops.SYMBOL in frozen.ir("lowered")
    want = np.maximum(conv_reference(x, w.numpy(), (1, 1), ((1, 1), (1, 1)), (1, 1))
                      + bias.numpy() + skip, 0)
    np.testing.assert_allclose(frozen(x, skip).numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer(x, skip).numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_module_s_convolutions_share_code_that_decides_at_run_time():
    """The family's code is built once per module, by its first conv: the grouped conv
    after one the blocked loops take goes to the gemm (the decision is made per call)."""
    rng = np.random.default_rng(1)
    first = sf.Variable(rng.standard_normal((3, 3, 16, 128)).astype(np.float32) / 10)
    grouped = sf.Variable(rng.standard_normal((3, 3, 64, 128)).astype(np.float32) / 10)

    @sf.function
    def layers(x):
        return sf.nn.conv2d(sf.nn.conv2d(x, first, 1, "SAME"), grouped, 1, "SAME")

    x = rng.standard_normal((1, 6, 6, 16)).astype(np.float32)
    same, one = ((1, 1), (1, 1)), (1, 1)
    hidden = conv_reference(x, first.numpy(), one, same, one).astype(np.float32)
    w = grouped.numpy()
    halves = [conv_reference(hidden[..., 64 * g:64 * (g + 1)], w[..., 64 * g:64 * (g + 1)],
                             one, same, one) for g in range(2)]
    frozen = layers.freeze(x)
    assert frozen.ir("optimized").count("conv2d_prepacked") == 2
    np.testing.assert_allclose(frozen(x).numpy(), np.concatenate(halves, -1), rtol=1e-4,
                               atol=1e-4)
