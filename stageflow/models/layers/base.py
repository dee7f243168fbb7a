"""The base of Keras-style layers: modules that create their variables on first call.

A layer's `build(input_shape)` runs on its first call, when the input's last dim is known;
its variables get Glorot-uniform kernels and zero biases, as Keras does. Inside
`sf.function` the first call happens while tracing: initial values are computed eagerly
(initializers run under `sf.init_scope`), so the first trace creates the variables and the
function is traced once more to use them (the paper's state-creation rule). Layers are
`sf.Module`s, so their variables are tracked through attributes like any module's.

``training=`` (Keras' argument) is a Python bool decided at trace time: a staged function
taking it as an argument is traced once per mode. Layers whose `call` takes it (batch norm,
dropout, `Sequential`) get the caller's value, or the enclosing layer call's, or False.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes, nest, precision
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import cast
from stageflow.frontend.ops.shape_of import shape
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.models import backend_config
from stageflow.models.activations import get_activation
from stageflow.models.initializers import get_initializer
from stageflow.models.layers import symbolic
from stageflow.models.module import Module
from stageflow.models.naming import auto_name
from stageflow.models.regularizers import get as get_regularizer

__all__ = ["Layer"]


# --------------------------------------------------------------------------- layers


class Layer(Module):
    """A module whose `build(input_shape)` runs once, on its first call, before `call`.

    ``trainable=False`` freezes the layer: its variables (and its sub-layers') are made
    non-trainable, so tapes do not watch them and `trainable_variables` leaves them out.

    Subclass it with a `build` that creates the variables with `add_weight` (the input's
    shape is known by then, so no layer asks for its input size) and a `call`; variables
    take the input's floating dtype, else float32, unless the layer has a precision policy
    (``dtype=``, or the global one of `sf.keras.mixed_precision`): then its variables are
    the policy's `variable_dtype`, its floating inputs are cast to its `compute_dtype`, and
    inside `call` its variables read as that dtype (``mixed_bfloat16``: float32 variables
    read as bfloat16 casts, whose gradients come back float32), as in Keras:

    >>> class Scale(sf.layers.Layer):
    ...     def build(self, input_shape):
    ...         self.w = self.add_weight("w", (input_shape[-1],), "ones")
    ...     def call(self, inputs):
    ...         return inputs * self.w
    >>> layer = Scale(name="scale")
    >>> layer(sf.constant([[1.0, 2.0, 3.0]], sf.float64))
    sf.Tensor([[1., 2., 3.]], shape=(1, 3), dtype=float64)
    >>> layer.w
    sf.Variable([1., 1., 1.], name='scale/w', shape=(3,), dtype=float64)
    >>> layer.trainable = False
    >>> layer.trainable_variables
    []
    >>> mixed = Scale(dtype="mixed_bfloat16")
    >>> mixed(sf.constant([[1.0, 2.0]])).dtype.name, mixed.w.dtype.name
    ('bfloat16', 'float32')
    """

    _TRACKING_IGNORED = Module._TRACKING_IGNORED | {"_activation_fn", "_dtype", "_policy",
                                                    "_trainable",
                                                    "input_spec", "batch_input_shape",
                                                    "_first_batch", "_init_arguments",
                                                    "kernel_regularizer", "bias_regularizer",
                                                    "activity_regularizer",
                                                    "_activity_losses"}

    _WALK_SORTED = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _taking_input_shape(cls.__dict__["__init__"])

    def __init__(self, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(name or auto_name(type(self).__name__))
        self.built = False
        # Keras' ``input_shape=``/``input_dim=`` of a model's first layer: what a
        # `Sequential` builds itself for before any call (`_taking_input_shape`).
        self.batch_input_shape: tuple[int | None, ...] | None = None
        # What the first call took, its batch dim free (as Keras records it): what a layer
        # called only eagerly is saved for (`sf.saved.save`).
        self.input_spec: TensorSpec | None = None
        # the batch size of the call that built the layer (None: its input was declared)
        self._first_batch: int | None = None
        self._trainable = bool(trainable)
        # `dtype=` (a policy, its name or a floating dtype), else the global policy if one
        # is set, fixed now as Keras fixes it; None: the first input's floating dtype.
        self._policy = (precision.as_policy(dtype, f"{type(self).__name__}(dtype=...)")
                        if dtype is not None
                        else precision.explicit_global_policy())
        self._dtype = None if dtype is None else self._policy.variable
        # Keras' penalties (`models.regularizers`), taken by every layer's `__init__`
        # (`_taking_input_shape`): on the kernel and bias where the layer has them, and on
        # the outputs of its last call.
        self.kernel_regularizer: Callable[[Any], Tensor] | None = None
        self.bias_regularizer: Callable[[Any], Tensor] | None = None
        self.activity_regularizer: Callable[[Any], Tensor] | None = None
        self._activity_losses: list[Tensor] = []

    @property
    def losses(self) -> list[Tensor]:
        """The penalties of this layer's regularizers and its sublayers' (Keras'
        ``layer.losses``): its weights' now, its outputs' as of its last call (divided by
        their batch, as Keras does). `fit` adds their sum to the loss.

        >>> layer = sf.keras.layers.Dense(2, kernel_initializer="ones",
        ...                               kernel_regularizer=sf.keras.regularizers.L2(0.5))
        >>> _ = layer(sf.ones((1, 3)))
        >>> layer.losses
        [sf.Tensor(3., shape=(), dtype=float32)]
        """
        layers = [self, *(m for m in self.submodules if isinstance(m, Layer))]
        return [loss for layer in layers for loss in layer._own_losses()]

    def _own_losses(self) -> list[Tensor]:
        penalties = []
        for regularizer, weight in ((self.kernel_regularizer, getattr(self, "kernel", None)),
                                    (self.bias_regularizer, getattr(self, "bias", None))):
            if regularizer is not None and weight is not None:
                penalties.append(regularizer(weight))
        return penalties + list(self._activity_losses)

    @property
    def dtype_policy(self) -> precision.Policy:
        """The layer's precision policy (Keras' ``layer.dtype_policy``): its ``dtype=``,
        else the global policy when the layer was made; without either, the policy of the
        dtype its variables took from its first input (float32 before that call).

        >>> layer = sf.keras.layers.Dense(2, dtype="mixed_bfloat16")
        >>> layer.dtype_policy
        <Policy "mixed_bfloat16">
        >>> layer.compute_dtype, layer.variable_dtype, layer.dtype
        ('bfloat16', 'float32', 'float32')
        >>> sf.keras.layers.Dense(2)(sf.ones((1, 3), sf.float64)).dtype.name
        'float64'
        """
        if self._policy is not None:
            return self._policy
        return precision.as_policy(self._dtype or dtypes.float32)

    @property
    def compute_dtype(self) -> str:
        """The dtype the layer casts its floating inputs to and computes in."""
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        """The dtype of the layer's variables."""
        return self.dtype_policy.variable_dtype

    @property
    def dtype(self) -> str:
        """The variables' dtype, as Keras' ``layer.dtype``."""
        return self.dtype_policy.variable_dtype

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)
        for variable in self.variables:
            variable.trainable = self._trainable
        for layer in self.submodules:
            if isinstance(layer, Layer):
                layer._trainable = self._trainable

    def get_config(self) -> dict[str, Any]:
        """The layer's config (Keras' ``get_config``): its name and trainability, and the
        arguments it was constructed with, from which `from_config` makes it again (its
        variables not restored: a saved model's weights are).

        >>> sf.keras.layers.Dense(2, activation="relu", name="d").get_config()
        {'name': 'd', 'trainable': True, 'units': 2, 'activation': 'relu'}
        """
        return {"name": self.name, "trainable": self.trainable,
                **self.__dict__.get("_init_arguments", {})}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Layer:
        """A new layer from a `get_config` config: ``cls(**config)``."""
        return cls(**config)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create the variables for inputs of this shape (the default creates none)."""

    def __call__(self, inputs: Any, *args: Any, training: Any = None, **kwargs: Any) -> Any:
        """Build on the first call, then `call`. ``training`` (Keras' argument) is given
        to `call` when it takes one: this call's value, else that of the layer call this
        one runs in (a block calling its batch norm without passing it), else False."""
        if symbolic.is_symbolic(inputs) or symbolic.is_symbolic((args, kwargs)):
            if training is not None:
                kwargs["training"] = training
            return symbolic.call_symbolic(self, (inputs, *args), kwargs)
        if not self.built:
            if not hasattr(inputs, "shape"):
                inputs = convert_to_tensor(inputs)
            self._dtype = self._variable_dtype(getattr(inputs, "dtype", None))
            self.build(tuple(inputs.shape))
            self.built = True
            if isinstance(inputs, Tensor) and inputs.ndim and self.input_spec is None:
                self.input_spec = TensorSpec((None, *inputs.shape[1:]), inputs.dtype)
                self._first_batch = inputs.shape[0]
        training = _resolve_training(training)
        if takes_training(self.call):
            kwargs["training"] = training
        # A layer with a policy computes in its compute dtype, and its variables read as
        # that dtype inside its call (and the calls it makes) when it is mixed or nested in
        # a layer that casts; a layer without one leaves both as they are.
        policy = self._policy
        casts = None
        if policy is not None:
            inputs, args, kwargs = _autocast((inputs, args, kwargs), policy.compute)
            stack = precision.autocast_stack()
            if policy.mixed or stack:
                casts = stack
                casts.append(policy.compute)
        # The mode (and the autocast dtype) pushed for the calls inside, without a context
        # manager: a generator-based one cost a third of a layer call.
        modes = _training_modes()
        modes.append(training)
        try:
            outputs = self.call(inputs, *args, **kwargs)
        finally:
            modes.pop()
            if casts is not None:
                casts.pop()
        if self.activity_regularizer is not None:
            penalty = self.activity_regularizer(outputs)
            rows = shape(outputs)[0] if getattr(outputs, "ndim", 0) else 1
            self._activity_losses = [penalty / cast(rows, penalty.dtype)]
        return outputs

    def call(self, inputs: Any) -> Any:
        return inputs

    def add_weight(self, name: str, shape: Sequence[int], initializer: str | Callable,
                   dtype: Any = None, trainable: bool = True, aggregation: Any = None
                   ) -> Variable:
        """A new variable named ``<layer>/<name>``, initialised eagerly even inside a trace
        (`aggregation`: see `sf.VariableAggregation`)."""
        init = get_initializer(initializer)
        dtype = dtypes.as_dtype(dtype or self._variable_dtype(None))
        shape = tuple(int(d) for d in shape)
        # dtype by keyword, as Keras passes it: `kernel_initializer=sf.random.normal` works.
        return Variable(lambda: init(shape, dtype=dtype), trainable=trainable and self._trainable,
                        name=f"{self.name}/{name}", dtype=dtype, aggregation=aggregation)

    def _variable_dtype(self, input_dtype: Any) -> np.dtype:
        """The policy's variable dtype, else the dtype the layer took, else the input's
        floating dtype, else the default float dtype (`sf.keras.backend.floatx`)."""
        if self._policy is not None:
            return self._policy.variable
        if self._dtype is not None:
            return self._dtype
        if input_dtype is not None and dtypes.is_floating(input_dtype):
            return dtypes.as_dtype(input_dtype)
        return dtypes.as_dtype(backend_config.floatx())

    def _last_dim(self, input_shape: tuple[int | None, ...], min_rank: int) -> int:
        if len(input_shape) < min_rank or input_shape[-1] is None:
            raise ValueError(
                f"{type(self).__name__} {self.name!r}: needs inputs of rank >= {min_rank} "
                f"with a known last dim to create its variables, got shape "
                f"{format_shape(input_shape)}{describe_location()}")
        return int(input_shape[-1])


def _autocast(structure: Any, dtype: np.dtype) -> Any:
    """`structure` with its floating tensors and arrays cast to `dtype`, as Keras casts a
    layer's inputs to its compute dtype (integer ids and boolean masks keep theirs)."""
    leaves, treedef = nest.flatten(structure)
    cast_any = False
    for i, leaf in enumerate(leaves):
        if (isinstance(leaf, Tensor | np.ndarray) and leaf.dtype != dtype
                and dtypes.is_floating(leaf.dtype)):
            leaves[i] = cast(convert_to_tensor(leaf), dtype)
            cast_any = True
    return nest.unflatten(treedef, leaves) if cast_any else structure


def _taking_input_shape(init: Callable[..., None]) -> Callable[..., None]:
    """A layer class's `__init__` that also takes Keras' shape keywords, which every layer
    accepts: ``input_shape`` (without the batch dim), ``input_dim`` (the same, rank 1),
    ``batch_input_shape`` and ``batch_size``; and its regularizer keywords:
    ``activity_regularizer`` on every layer, ``kernel_regularizer`` and
    ``bias_regularizer`` on those with a kernel and a bias."""

    # A keyword the layer's own `__init__` takes (`Embedding`'s ``input_dim``) stays its own.
    taken = _SHAPE_KEYWORDS - set(inspect.signature(init).parameters)

    penalties = _REGULARIZER_KEYWORDS - set(inspect.signature(init).parameters)

    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self: Layer, *args: Any, **kwargs: Any) -> None:
        shape = {key: kwargs.pop(key) for key in taken & set(kwargs)}
        regularizers = {key: kwargs.pop(key) for key in penalties & set(kwargs)}
        if "_init_arguments" not in self.__dict__:  # the outermost class's arguments
            self.__dict__["_init_arguments"] = {**_arguments(signature, self, args, kwargs),
                                                **shape, **regularizers}
        init(self, *args, **kwargs)
        for key, value in regularizers.items():
            if key != "activity_regularizer" and not hasattr(self, key.split("_")[0]):
                raise TypeError(f"{type(self).__name__}: has no {key.split('_')[0]} to take "
                                f"{key}=")
            setattr(self, key, get_regularizer(value))
        batch_input_shape = shape.get("batch_input_shape")
        input_shape = shape.get("input_shape")
        if shape.get("input_dim") is not None:
            input_shape = (int(shape["input_dim"]),)
        if input_shape is not None:
            batch_input_shape = (shape.get("batch_size"), *input_shape)
        if batch_input_shape is not None:
            self.batch_input_shape = tuple(None if d is None else int(d)
                                           for d in batch_input_shape)

    return __init__


def _arguments(signature: inspect.Signature, layer: Layer, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a layer's construction by name (Keras' automatic config): those
    its `__init__` names, and its ``**kwargs``; {} where they do not bind."""
    try:
        bound = signature.bind(layer, *args, **kwargs)
    except TypeError:
        return dict(kwargs)
    arguments: dict[str, Any] = {}
    for name, value in list(bound.arguments.items())[1:]:
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            arguments[name] = value
    return arguments


_SHAPE_KEYWORDS = frozenset({"input_shape", "input_dim", "batch_input_shape", "batch_size"})
_REGULARIZER_KEYWORDS = frozenset({"kernel_regularizer", "bias_regularizer",
                                   "activity_regularizer"})


Layer.__init__ = _taking_input_shape(Layer.__init__)  # a layer class without an __init__


# --------------------------------------------------------------------------- training mode

# The training mode of the layer calls in progress on this thread, innermost last.
_training_stack = threading.local()


def _resolve_training(training: Any) -> bool:
    """An explicit value wins; otherwise the enclosing layer call's; otherwise False."""
    if training is not None:
        return bool(training)
    stack = getattr(_training_stack, "modes", None)
    return stack[-1] if stack else False


def in_layer_call() -> bool:
    """Whether a layer call is in progress on this thread (so a nested call inherits its
    mode): Keras' augmentation layers default to training only when called alone."""
    return bool(getattr(_training_stack, "modes", None))


def _training_modes() -> list[bool]:
    """This thread's stack of the modes of the layer calls in progress."""
    try:
        return _training_stack.modes
    except AttributeError:
        modes = _training_stack.modes = []
        return modes


context.inherit_list_in_threads(_training_stack, "modes")


# Signatures are read once per function (the check runs on every layer call).
_TAKES_TRAINING: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def takes_training(fn: Callable) -> bool:
    """Whether `fn` (a layer, a module with a `call`, a function) has a ``training``
    parameter: `Sequential` passes the mode only to those (a lambda would reject it)."""
    if isinstance(fn, Layer):
        return True  # `Layer.__call__` takes it, whether or not its `call` does
    if isinstance(fn, Module) and hasattr(fn, "call"):
        fn = fn.call
    key = getattr(fn, "__func__", fn)
    try:
        return _TAKES_TRAINING[key]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable
        pass
    try:
        takes = "training" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        takes = False
    try:
        _TAKES_TRAINING[key] = takes
    except TypeError:
        pass
    return takes


class _KernelLayer(Layer):
    """A layer with a kernel, an optional bias and an activation (Dense, Conv2D): the shared
    arguments, variable creation and epilogue; subclasses give the kernel's shape and the
    product."""

    def __init__(self, activation: str | Callable | None, use_bias: bool,
                 kernel_initializer: str | Callable, bias_initializer: str | Callable,
                 trainable: bool, name: str | None, dtype: Any) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.activation = activation
        self._activation_fn = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.kernel: Variable | None = None
        self.bias: Variable | None = None

    def _create(self, kernel_shape: tuple[int, ...], outputs: int) -> None:
        self.kernel = self.add_weight("kernel", kernel_shape, self.kernel_initializer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (outputs,), self.bias_initializer)

    def _epilogue(self, outputs: Tensor) -> Tensor:
        if self.bias is not None:
            outputs = outputs + self.bias
        if self._activation_fn is not None:
            outputs = self._activation_fn(outputs)
        return outputs


def _pair(value: int | Sequence[int], name: str, layer: str) -> tuple[int, int]:
    values = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(values) != 2 or min(int(v) for v in values) < 1:
        raise ValueError(f"{layer}: {name} must be a positive int or a pair, got {value!r}")
    return int(values[0]), int(values[1])


def _padding_mode(padding: Any, layer: str) -> str:
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"{layer}: padding must be 'valid' or 'same', got {padding!r}")
    return padding.lower()
