"""Complex values in an exported model: each is a real tensor of its parts, ``[..., 2]``
(real, imaginary), since ONNX's operators compute no complex arithmetic.

A constant or variable of a complex dtype is stored so (`Builder.const`); the ops below
take and give complex values in that form, with the formulas NumPy computes (a product's
parts, a quotient by the divisor's squared modulus, exp and log through the modulus and
the angle). A complex input or output of the model is its parts too; an op on complex
values without a rule here is refused, naming the op.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stageflow.core import dtypes
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.frontend.graph import Equation
from stageflow.onnx import export_ops
from stageflow.onnx.export_builder import Builder, OnnxMath, Term
from stageflow.primitives import collective, reduction
from stageflow.primitives import elementwise as ew
from stageflow.primitives import functional as fn
from stageflow.primitives import special as sp
from stageflow.primitives import structural as st

__all__ = ["COMPLEX_RULES", "takes_complex"]

Rule = Callable[..., str]
COMPLEX_RULES: dict[Primitive, Rule] = {}


def takes_complex(eq: Equation) -> bool:
    """Whether any operand or result of `eq` is complex."""
    return any(isinstance(v.type, ShapedType) and dtypes.is_complex(v.type.dtype)
               for v in (*eq.inputs, *eq.outputs))


def _rule(*primitives: Primitive) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        for primitive in primitives:
            COMPLEX_RULES[primitive] = rule
        return rule
    return register


def _parts(b: Builder, z: str) -> tuple[str, str]:
    return (b.op("Gather", z, b.scalar(0, dtypes.int64), axis=-1),
            b.op("Gather", z, b.scalar(1, dtypes.int64), axis=-1))


def _pack(b: Builder, re: str, im: str) -> str:
    last = b.ints([-1])
    return b.op("Concat", b.op("Unsqueeze", re, last), b.op("Unsqueeze", im, last), axis=-1)


def _part_dtype(eq: Equation) -> np.dtype:
    complex_type = next(v.type.dtype for v in (*eq.inputs, *eq.outputs)
                        if dtypes.is_complex(v.type.dtype))
    return dtypes.real_dtype(complex_type)


@_rule(ew.add_p, ew.subtract_p, ew.negative_p, fn.stop_gradient_p, fn.device_copy_p)
def linear(b: Builder, eq: Equation, *zs: str) -> str:
    """Part by part (the parts' axis lines up under broadcasting)."""
    op_type = {ew.add_p: "Add", ew.subtract_p: "Sub", ew.negative_p: "Neg"}.get(
        eq.primitive, "Identity")
    return b.op(op_type, *zs)


@_rule(collective.all_reduce_p)
def all_reduce(b: Builder, eq: Equation, *zs: str) -> str:
    """A sum or mean (complex values have no max or min) part by part, left to right."""
    total = b.op("Identity", zs[0]) if len(zs) == 1 else zs[0]
    for z in zs[1:]:
        total = b.op("Add", total, z)
    if collective.REDUCTIONS[eq.params["reduction"]].mean:
        total = b.op("Div", total, b.scalar(len(zs), _part_dtype(eq)))
    return total


@_rule(ew.multiply_p)
def multiply(b: Builder, eq: Equation, z: str, w: str) -> str:
    (a, c), (d, e) = _parts(b, z), _parts(b, w)
    return _pack(b, b.op("Sub", b.op("Mul", a, d), b.op("Mul", c, e)),
                 b.op("Add", b.op("Mul", a, e), b.op("Mul", c, d)))


@_rule(ew.divide_p)
def divide(b: Builder, eq: Equation, z: str, w: str) -> str:
    """z conj(w) / |w|^2."""
    (a, c), (d, e) = _parts(b, z), _parts(b, w)
    norm = b.op("Add", b.op("Mul", d, d), b.op("Mul", e, e))
    return _pack(b, b.op("Div", b.op("Add", b.op("Mul", a, d), b.op("Mul", c, e)), norm),
                 b.op("Div", b.op("Sub", b.op("Mul", c, d), b.op("Mul", a, e)), norm))


@_rule(ew.conj_p)
def conj(b: Builder, eq: Equation, z: str) -> str:
    return b.op("Mul", z, b.const(np.array([1, -1], _part_dtype(eq))))


@_rule(ew.real_p, ew.imag_p)
def part(b: Builder, eq: Equation, z: str) -> str:
    return _parts(b, z)[0 if eq.primitive is ew.real_p else 1]


@_rule(ew.complex_p)
def make_complex(b: Builder, eq: Equation, x: str, y: str) -> str:
    """The parts broadcast to the result's shape first."""
    shape = b.op("Shape", b.op("Add", x, y))
    return _pack(b, b.op("Expand", x, shape), b.op("Expand", y, shape))


def _modulus(b: Builder, re: str, im: str) -> str:
    return b.op("Sqrt", b.op("Add", b.op("Mul", re, re), b.op("Mul", im, im)))


@_rule(ew.abs_p)
def modulus(b: Builder, eq: Equation, z: str) -> str:
    return _modulus(b, *_parts(b, z))


@_rule(ew.exp_p)
def exp(b: Builder, eq: Equation, z: str) -> str:
    re, im = _parts(b, z)
    scale = b.op("Exp", re)
    return _pack(b, b.op("Mul", scale, b.op("Cos", im)), b.op("Mul", scale, b.op("Sin", im)))


@_rule(ew.log_p)
def log(b: Builder, eq: Equation, z: str) -> str:
    """log |z| + i angle(z), the angle by `primitives.special`'s atan2."""
    re, im = _parts(b, z)
    dtype = _part_dtype(eq)
    wide = [Term(b, b.cast(x, dtype, dtypes.float64)) for x in (im, re)]
    angle = sp.ALGORITHMS[sp.atan2_p](OnnxMath(b), *wide).name
    return _pack(b, b.op("Log", _modulus(b, re, im)), b.cast(angle, dtypes.float64, dtype))


@_rule(ew.cast_p)
def cast(b: Builder, eq: Equation, x: str) -> str:
    """Real to complex (a zero imaginary part) or complex to real (the real part, as
    TensorFlow's cast); complex to complex of other parts."""
    source, target = eq.inputs[0].type.dtype, eq.outputs[0].type.dtype
    if dtypes.is_complex(source) and dtypes.is_complex(target):
        return b.cast(x, dtypes.real_dtype(source), dtypes.real_dtype(target))
    if dtypes.is_complex(source):
        if target == dtypes.bool_:
            raise NotImplementedError("a cast of complex values to bool")
        return b.cast(_parts(b, x)[0], dtypes.real_dtype(source), target)
    re = b.cast(x, source, dtypes.real_dtype(target))
    return _pack(b, re, b.op("Mul", re, b.scalar(0, dtypes.real_dtype(target))))


@_rule(reduction.reduce_sum_p)
def reduce_sum(b: Builder, eq: Equation, z: str) -> str:
    """Over the same axes, counted from the end past the parts' axis."""
    axes = [_axis(a) for a in eq.params["axes"]]
    return b.op("ReduceSum", z, b.ints(axes), keepdims=int(eq.params["keepdims"]),
                noop_with_empty_axes=1)


@_rule(st.broadcast_to_p)
def broadcast_to(b: Builder, eq: Equation, z: str) -> str:
    shape = [1 if d is None else d for d in eq.params["shape"]]
    return b.op("Expand", z, b.ints([*shape, 2]))


@_rule(st.reshape_p)
def reshape(b: Builder, eq: Equation, z: str) -> str:
    """The new shape and the parts' axis; a dim of the operand (-2 - k) read at run time."""
    target = eq.params["shape"]
    if any(n <= -2 for n in target):
        dims = [b.op("Shape", z, start=-2 - n, end=-1 - n) if n <= -2 else b.ints([n])
                for n in target]
        shape = b.op("Concat", *dims, b.ints([2]), axis=0)
    else:
        shape = b.ints([*target, 2])
    return b.op("Reshape", z, shape, allowzero=1)


@_rule(st.transpose_p)
def transpose(b: Builder, eq: Equation, z: str) -> str:
    perm = list(eq.params["perm"])
    return b.op("Transpose", z, perm=[*perm, len(perm)])


@_rule(st.constant_p)
def constant(b: Builder, eq: Equation) -> str:
    return b.const(eq.params["value"], eq.outputs[0].type.dtype)


@_rule(ew.select_p)
def select(b: Builder, eq: Equation, condition: str, z: str, w: str) -> str:
    return b.op("Where", b.op("Unsqueeze", condition, b.ints([-1])), z, w)


def _axis(axis: int) -> int:
    """An axis of the complex value as an axis of its parts (from the end: one further)."""
    return axis if axis >= 0 else axis - 1


@_rule(st.concat_p)
def concat(b: Builder, eq: Equation, *zs: str) -> str:
    return b.op("Concat", *zs, axis=_axis(eq.params["axis"]))


@_rule(st.gather_p)
def gather(b: Builder, eq: Equation, z: str, indices: str) -> str:
    return b.op("Gather", z, indices, axis=_axis(eq.params["axis"]))


@_rule(st.slice_p)
def slice_(b: Builder, eq: Equation, z: str) -> str:
    """The slices of the value's axes; the parts' axis whole."""
    return export_ops.slice_(b, eq, z)
