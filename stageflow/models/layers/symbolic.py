"""The functional API's symbolic values: `Input` and what layers return when called on it.

``x = sf.keras.Input((784,)); y = Dense(10)(x)`` records a graph of layer calls instead of
computing; ``sf.keras.Model(x, y)`` then runs the graph on real inputs. Each `KerasTensor`
keeps a concrete example (the layers run once on zeros, batch 1, when the graph is built):
that is how shapes are known without a second, symbolic implementation of every layer, and
why a layer is built, its variables created, as soon as it is connected, as in Keras.

An `Input` with unknown dims besides the batch's (``Input((None, None, 3))``, images of any
size) keeps a second example, its unknown dims of another size, and the layers run on both:
a dim of an output is unknown where the two examples' outputs differ. The sizes are
`EXAMPLE_SIZES`: a stride or window of up to the smaller one maps them to different sizes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from stageflow.core import dtypes, nest
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.sparse_ops import from_dense
from stageflow.frontend.tensor import Tensor
from stageflow.models.naming import auto_name

__all__ = ["Input"]

# The sizes of an `Input`'s unknown dims in its two examples.
EXAMPLE_SIZES = (32, 64)


class Node:
    """One call of the graph: `fn` (a layer, or an operator) applied to `args` and
    `kwargs`, whose `KerasTensor` leaves are the values of earlier nodes."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.inputs = [leaf for leaf in nest.flatten((args, kwargs))[0]
                       if isinstance(leaf, KerasTensor)]
        self.outputs: Any = None


class KerasTensor:
    """A symbolic value: a shape whose batch dim is free (``None``), a dtype, and the node
    that makes it (none for an `Input`). Arithmetic on it (``a + b``, ``x[:, 0]``, ``-x``)
    records an operator node as a layer call does. `variant`, where an `Input` has unknown
    dims, is the example computed from its other example: the dims where the two differ
    are unknown (None) in `shape`."""

    def __init__(self, example: Tensor, batch: int | None, node: Node | None,
                 name: str | None = None, variant: Tensor | None = None) -> None:
        self.example = example
        self.variant = variant
        self.shape: tuple[int | None, ...] = ((batch, *known_dims(example, variant))
                                              if example.ndim else ())
        self.dtype = example.dtype
        self.node = node
        self.name = name or auto_name("KerasTensor")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return (f"<KerasTensor shape={format_shape(self.shape)}, dtype={self.dtype.name}, "
                f"name={self.name}>")

    def __bool__(self) -> bool:
        raise TypeError(f"a KerasTensor (the functional API's symbolic value, {self.name}) "
                        f"has no truth value: branch inside a layer's `call` instead"
                        f"{describe_location()}")

    def __getitem__(self, key: Any) -> KerasTensor:
        return call_symbolic(operator.getitem, (self, key), {})


def _operator(fn: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[..., Any]:
    def method(self: KerasTensor, other: Any) -> KerasTensor:
        args = (other, self) if reflected else (self, other)
        return call_symbolic(fn, args, {})
    method.__name__ = f"__{'r' if reflected else ''}{fn.__name__.strip('_')}__"
    return method


for _fn in (operator.add, operator.sub, operator.mul, operator.truediv, operator.matmul,
            operator.pow):
    _name = _fn.__name__.strip("_")
    setattr(KerasTensor, f"__{_name}__", _operator(_fn))
    setattr(KerasTensor, f"__r{_name}__", _operator(_fn, reflected=True))
KerasTensor.__neg__ = lambda self: call_symbolic(operator.neg, (self,), {})  # type: ignore


def Input(shape: tuple[int | None, ...] | None = None, batch_size: int | None = None,  # noqa: N802 - Keras' name
          dtype: Any = None, name: str | None = None, sparse: bool = False) -> KerasTensor:
    """A model's input: `shape` without the batch dim (``Input((28, 28, 1))``), float32
    unless `dtype` says otherwise. None dims are sizes known only when the model is called
    (``Input((None, None, 3))``: images of any size).

    >>> x = sf.keras.Input((3,))
    >>> y = sf.layers.Dense(2)(x)
    >>> y.shape
    (None, 2)
    >>> model = sf.keras.Model(x, y)
    >>> model(sf.ones((5, 3))).shape
    (5, 2)
    >>> images = sf.keras.Input((None, None, 3))
    >>> sf.layers.Conv2D(4, 3)(images).shape
    (None, None, None, 4)

    ``sparse=True`` takes `sf.SparseTensor` values (the model's layers see them as such:
    `Dense` multiplies them as sparse matrices).
    """
    shape = () if shape is None else tuple(shape)
    example, variant = examples(shape, dtypes.as_dtype(dtype or dtypes.float32),
                                1 if batch_size is None else int(batch_size))
    if sparse:
        example, variant = (None if value is None else from_dense(value)
                            for value in (example, variant))
    # Keras' `Input` makes an `InputLayer`, named "input_layer" unless `name` is given,
    # which is the model summary's first row: here the input's name stands for both.
    return KerasTensor(example, batch_size, None, name=name or auto_name("InputLayer"),
                       variant=variant)


def examples(shape: tuple[int | None, ...], dtype: Any, batch: int = 1
             ) -> tuple[Tensor, Tensor | None]:
    """Zeros of `shape` (without its batch dim), the unknown (None) dims of the sizes of
    `EXAMPLE_SIZES`: the example, and the variant (None where every dim is known)."""
    dims = tuple(None if d is None else int(d) for d in shape)

    def example(size: int) -> Tensor:
        return zeros((batch, *(size if d is None else d for d in dims)), dtype)

    return example(EXAMPLE_SIZES[0]), example(EXAMPLE_SIZES[1]) if None in dims else None


def known_dims(example: Tensor, variant: Tensor | None) -> tuple[int | None, ...]:
    """The dims after the batch's of what `example` and `variant` stand for: those where
    they differ are unknown (None)."""
    if variant is None:
        return tuple(example.shape[1:])
    return tuple(a if a == b else None for a, b in zip(example.shape[1:], variant.shape[1:],
                                                       strict=True))


def is_symbolic(value: Any) -> bool:
    """Whether `value` (a structure) holds a `KerasTensor`: a layer called on it records."""
    if isinstance(value, KerasTensor):
        return True
    if isinstance(value, list | tuple | dict):
        return any(isinstance(leaf, KerasTensor) for leaf in nest.flatten(value)[0])
    return False


def call_symbolic(fn: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    """Record ``fn(*args, **kwargs)`` as a node; its outputs are `KerasTensor`s (in the
    structure `fn` returns) made by running `fn` on the inputs' examples."""
    node = Node(fn, args, kwargs)
    leaves, treedef = nest.flatten(_run(fn, node, {id(t): t.example for t in node.inputs}))
    variants: list[Any] = [None] * len(leaves)
    if any(t.variant is not None for t in node.inputs):
        values = {id(t): t.example if t.variant is None else t.variant for t in node.inputs}
        variants = nest.flatten(_run(fn, node, values, ", which needs a dim the Input leaves "
                                                       "unknown (None): with another size "
                                                       "there it fails"))[0]
        for leaf, variant in zip(leaves, variants, strict=True):
            if isinstance(leaf, Tensor) and leaf.ndim != variant.ndim:
                raise ValueError(f"{_describe(fn)}: the rank of its output depends on the "
                                 f"dims the Input leaves unknown (None), which a symbolic "
                                 f"value cannot describe{describe_location()}")
    batch = _batch(node.inputs)
    outputs = [KerasTensor(leaf, batch, node, variant=variant) if isinstance(leaf, Tensor)
               else leaf for leaf, variant in zip(leaves, variants, strict=True)]
    node.outputs = nest.unflatten(treedef, outputs)
    return node.outputs


def _run(fn: Callable[..., Any], node: Node, values: dict[int, Any], which: str = "") -> Any:
    """`fn` on the node's arguments with its `KerasTensor`s replaced by `values`: a shape
    or dtype the layer refuses is an error naming the layer and the symbolic shapes."""
    example_args, example_kwargs = substitute((node.args, node.kwargs), values)
    try:
        return fn(*example_args, **example_kwargs)
    except (ValueError, TypeError) as error:
        shapes = ", ".join(format_shape(t.shape) for t in node.inputs)
        raise type(error)(f"{_describe(fn)} on symbolic inputs of shapes {shapes}{which}: "
                          f"{error}") from error


def substitute(structure: Any, values: dict[int, Any]) -> Any:
    """`structure` with each `KerasTensor` leaf replaced by ``values[id(leaf)]``."""
    leaves, treedef = nest.flatten(structure)
    return nest.unflatten(treedef, [values[id(leaf)] if isinstance(leaf, KerasTensor) else leaf
                                    for leaf in leaves])


def _batch(inputs: list[KerasTensor]) -> int | None:
    """The outputs' batch dim: the inputs' when they agree on a known one, else free."""
    known = {t.shape[0] for t in inputs if t.shape}
    return known.pop() if len(known) == 1 else None


def _describe(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "name", None)
    return f"{type(fn).__name__} {name!r}" if isinstance(name, str) else getattr(
        fn, "__name__", repr(fn))


def nodes_between(inputs: list[KerasTensor], outputs: list[KerasTensor]) -> list[Node]:
    """The nodes that compute `outputs` from `inputs`, each after those it reads (a depth-
    first walk back from the outputs). An output that needs a value not among `inputs`
    (another `Input`) is an error naming it."""
    given = {id(t) for t in inputs}
    order: list[Node] = []
    seen: set[int] = set()

    def visit(tensor: KerasTensor, path: tuple[int, ...]) -> None:
        if id(tensor) in given:
            return
        node = tensor.node
        if node is None:
            raise ValueError(f"Model: output needs {tensor.name} (an Input of shape "
                             f"{format_shape(tensor.shape)}) that is not among the model's "
                             f"inputs{describe_location()}")
        if id(node) in seen:
            return
        if id(node) in path:
            raise ValueError(f"Model: the graph has a cycle through {_describe(node.fn)}")
        for value in node.inputs:
            visit(value, (*path, id(node)))
        seen.add(id(node))
        order.append(node)

    for tensor in outputs:
        visit(tensor, ())
    return order


class Graph:
    """The layer calls from a model's inputs to its outputs (structures of `KerasTensor`s:
    one, a list, or a dict), run in order on real values."""

    def __init__(self, inputs: Any, outputs: Any) -> None:
        self.inputs, self.outputs = inputs, outputs
        self.input_leaves = _keras_leaves(inputs, "inputs")
        self.output_leaves = _keras_leaves(outputs, "outputs")
        for tensor in self.input_leaves:
            if tensor.node is not None:
                raise ValueError(f"Model: inputs must be sf.keras.Input values; {tensor.name} "
                                 f"is the output of {_describe(tensor.node.fn)}"
                                 f"{describe_location()}")
        self.nodes = nodes_between(self.input_leaves, self.output_leaves)

    def layers(self) -> list[Any]:
        """The graph's layers, each once, in the order they run."""
        seen: dict[int, Any] = {}
        for node in self.nodes:
            if hasattr(node.fn, "variables"):
                seen.setdefault(id(node.fn), node.fn)
        return list(seen.values())

    def __call__(self, values: Any) -> Any:
        leaves, _ = nest.flatten(values)
        if len(leaves) != len(self.input_leaves):
            raise ValueError(f"Model: expected {len(self.input_leaves)} input(s) (shapes "
                             f"{', '.join(format_shape(t.shape) for t in self.input_leaves)}), "
                             f"got {len(leaves)}{describe_location()}")
        known = {id(t): value for t, value in zip(self.input_leaves, leaves, strict=True)}
        for node in self.nodes:
            args, kwargs = substitute((node.args, node.kwargs), known)
            result = node.fn(*args, **kwargs)
            for symbol, value in zip(nest.flatten(node.outputs)[0], nest.flatten(result)[0],
                                     strict=True):
                known[id(symbol)] = value
        return substitute(self.outputs, known)


def _keras_leaves(structure: Any, what: str) -> list[KerasTensor]:
    leaves = nest.flatten(structure)[0]
    for leaf in leaves:
        if not isinstance(leaf, KerasTensor):
            raise TypeError(f"Model: {what} must be sf.keras.Input values and what layers "
                            f"return when called on them, got {type(leaf).__name__}"
                            f"{describe_location()}")
    return leaves
