"""Complex numbers: `sf.complex` and `tf.math`'s `real`, `imag`, `conj` and `angle`.

complex64 and complex128 tensors are pairs of float32 and float64 parts. These functions
take them apart and put them together; `real`, `imag`, `conj` and `complex` are
primitives (they fuse and compile like any elementwise op), `angle` is `atan2` of the
parts. As in TensorFlow, `real` and `conj` of a real tensor return it, `imag` gives its
zeros and `angle` 0 or pi by its sign, so code written for either kind of tensor runs on
both.
"""

from __future__ import annotations

import math
from typing import Any

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.creation import zeros_like
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import elementwise as ewp
from stageflow.primitives import special


def complex(real: Any, imag: Any) -> Tensor:  # noqa: A001 - the public name is sf.complex
    """real + i imag, elementwise with broadcasting (TensorFlow's ``tf.complex``).

    real, imag: float32 tensors (complex64 result) or float64 ones (complex128) of one
    dtype, or Python numbers, which take the other operand's dtype; returns the broadcast
    shape.

    >>> sf.complex([1.0, 2.0], [3.0, -4.0])
    sf.Tensor([1.+3.j, 2.-4.j], shape=(2,), dtype=complex64)
    >>> sf.complex(sf.constant([0.5], sf.float64), 1.0).dtype
    dtype('complex128')
    """
    return ewp.complex_p.bind(*binary_operands(real, imag))


@math_op
def real(x: Any) -> Tensor:
    """The real parts of a complex tensor, in the dtype of its parts; a real tensor itself.

    x: tensor of any shape; returns x's shape (float32 for complex64, float64 for
    complex128).

    >>> sf.math.real([1 + 2j, -3j])
    sf.Tensor([ 1., -0.], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return ewp.real_p.bind(x) if dtypes.is_complex(x.dtype) else x


@math_op
def imag(x: Any) -> Tensor:
    """The imaginary parts of a complex tensor, in the dtype of its parts; zeros for a real
    tensor.

    x: tensor of any shape; returns x's shape (float32 for complex64, float64 for
    complex128).

    >>> sf.math.imag([1 + 2j, -3j])
    sf.Tensor([ 2., -3.], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return ewp.imag_p.bind(x) if dtypes.is_complex(x.dtype) else zeros_like(x)


@math_op
def conj(x: Any) -> Tensor:
    """The complex conjugate x - iy of each x + iy; a real tensor itself.

    x: tensor of any shape; returns x's shape and dtype.

    >>> sf.math.conj([1 + 2j, 3 - 1j])
    sf.Tensor([1.-2.j, 3.+1.j], shape=(2,), dtype=complex64)
    """
    x = convert_to_tensor(x)
    return ewp.conj_p.bind(x) if dtypes.is_complex(x.dtype) else x


@math_op
def angle(x: Any) -> Tensor:
    """The argument of each complex number, atan2(imag, real) in [-pi, pi]; for a real
    tensor pi where it is negative and 0 elsewhere (as TensorFlow).

    x: float or complex tensor of any shape; returns x's shape in the dtype of its parts.

    >>> sf.math.angle([1j, -1 + 0j, -2j])
    sf.Tensor([ 1.5707964,  3.1415927, -1.5707964], shape=(3,), dtype=float32)
    >>> sf.math.angle([-2.0, 3.0])
    sf.Tensor([3.1415927, 0.       ], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    if dtypes.is_complex(x.dtype):
        return special.atan2_p.bind(ewp.imag_p.bind(x), ewp.real_p.bind(x))
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"angle: expected a float or complex tensor, got {x.dtype.name}"
                        f"{describe_location()}")
    return ew.where(ew.less(x, 0.0), convert_to_tensor(math.pi, x.dtype), 0.0)
