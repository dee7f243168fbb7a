"""The public API's tensor and op names exist with their meanings (the names TensorFlow users
type), and the public modules (`sf.nn`, `sf.layers`, ...) show exactly their `__all__`.

The lists are written out here, the contract this test holds the package to.
Also: eager execution builds no IR (no `xdsl` module is imported).
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import stageflow as sf

TENSORS = ["constant", "convert_to_tensor", "Tensor"]

ELEMENTWISE = (
    "add subtract multiply divide floordiv mod pow maximum minimum negative abs sign "
    "exp expm1 log log1p sqrt rsqrt square sin cos tanh sigmoid erf floor ceil round "
    "equal not_equal less less_equal greater greater_equal logical_and logical_or logical_not "
    "where cast clip_by_value"
).split()
REDUCTIONS = (
    "reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_logsumexp argmax argmin"
).split()
LINALG = ["matmul", "tensordot", "einsum"]
SHAPE = (
    "reshape transpose expand_dims squeeze concat stack split broadcast_to tile pad gather "
    "one_hot identity"
).split()
CREATION = "zeros ones fill zeros_like ones_like eye diag range linspace".split()
FUNCTIONAL = "map_fn scan foldl foldr TensorArray".split()
NN = (
    "relu relu6 leaky_relu elu gelu softplus sigmoid tanh softmax log_softmax dropout conv2d "
    "max_pool2d avg_pool2d softmax_cross_entropy_with_logits "
    "sparse_softmax_cross_entropy_with_logits"
).split()
RANDOM = ["set_seed", "normal", "uniform", "Generator"]
# The layers and optimizers of the contract.
LAYERS = ("Dense Conv2D BatchNormalization Dropout MaxPool2D AveragePooling2D "
          "GlobalAveragePooling2D Flatten ReLU Sequential").split()
OPTIMIZERS = ["SGD", "Adam"]
NAMESPACES = {"nn": NN, "layers": LAYERS, "optimizers": OPTIMIZERS, "random": RANDOM,
              "metrics": ["Mean", "Accuracy"],
              "losses": ["MeanSquaredError", "BinaryCrossentropy", "CategoricalCrossentropy",
                         "SparseCategoricalCrossentropy", "Huber", "MeanAbsoluteError"]}

DTYPES = {
    "float16": np.float16,
    "bfloat16": None,
    "float32": np.float32,
    "float64": np.float64,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}

OPS = ELEMENTWISE + REDUCTIONS + LINALG + SHAPE + CREATION + FUNCTIONAL


@pytest.mark.parametrize("name", TENSORS + OPS)
def test_top_level_name_exists_and_is_callable(name):
    assert hasattr(sf, name), f"sf.{name} is missing"
    assert callable(getattr(sf, name))


@pytest.mark.parametrize("name", NN)
def test_nn_name_exists_and_is_callable(name):
    assert hasattr(sf, "nn"), "sf.nn is missing"
    assert callable(getattr(sf.nn, name, None)), f"sf.nn.{name} is missing"


@pytest.mark.parametrize("name", RANDOM)
def test_random_name_exists_and_is_callable(name):
    assert hasattr(sf, "random"), "sf.random is missing"
    assert callable(getattr(sf.random, name, None)), f"sf.random.{name} is missing"


@pytest.mark.parametrize("namespace", list(NAMESPACES))
def test_namespace_shows_exactly_its_public_names(namespace):
    module = getattr(sf, namespace)
    public = [name for name in dir(module) if not name.startswith("_")]
    assert public == sorted(module.__all__), f"sf.{namespace} shows more than its __all__"
    assert set(NAMESPACES[namespace]) <= set(public), f"sf.{namespace} lacks names of the contract"
    assert all(callable(getattr(module, name)) or inspect.ismodule(getattr(module, name))
               for name in public)  # functions and classes; sub-namespaces (schedules)


@pytest.mark.parametrize("namespace", list(NAMESPACES))
def test_namespace_imports_as_a_module(namespace):
    module = importlib.import_module(f"stageflow.{namespace}")
    assert module is getattr(sf, namespace)
    assert inspect.getdoc(module)


# Every other public namespace, by the path users spell (settings and constants such as
# `sf.config.dump_dir` and `sf.data.AUTOTUNE` are part of an API, so not only callables).
OTHER_NAMESPACES = ["data", "train", "aot", "saved", "distribute", "config", "errors",
                    "optimizers.schedules", "linalg", "math", "debugging", "summary",
                    "summary.experimental", "profiler", "profiler.experimental", "keras",
                    "keras.backend", "keras.callbacks", "keras.models", "keras.mixed_precision",
                    "keras.activations", "keras.initializers", "keras.utils",
                    "saved_model",
                    "nest", "experimental", "experimental.dlpack",
                    "strings", "autograph", "autograph.experimental", "dtypes",
                    "config.experimental", "image", "io", "ragged", "sparse", "signal",
                    "io.gfile", "random.experimental"]


@pytest.mark.parametrize("path", OTHER_NAMESPACES)
def test_other_namespace_shows_exactly_its_public_names(path):
    module = sf
    for part in path.split("."):
        module = getattr(module, part)
    assert isinstance(module.__all__, list)
    assert all(hasattr(module, name) for name in module.__all__), f"sf.{path}: __all__ lies"
    public = [name for name in dir(module) if not name.startswith("_")]
    assert public == sorted(module.__all__), f"sf.{path} shows more than its __all__"
    assert inspect.getdoc(module)


def test_layers_lists_the_names_of_its_implementation_modules():
    """`sf.layers.__all__` is written out: it must not miss a layer defined since."""
    package = pathlib.Path(importlib.import_module("stageflow.models.layers").__file__).parent
    modules = sorted(path.stem for path in package.glob("*.py") if path.stem != "__init__")
    defined = {name for module in modules
               for name in importlib.import_module(f"stageflow.models.layers.{module}").__all__}
    defined |= {"get_activation", "get_initializer"}
    assert set(sf.layers.__all__) == defined


@pytest.mark.parametrize("method", ["normal", "uniform"])
def test_random_generator_has_from_seed_and_the_same_methods(method):
    assert callable(sf.random.Generator.from_seed)
    generator = sf.random.Generator.from_seed(1)
    assert isinstance(generator, sf.random.Generator)
    assert callable(getattr(generator, method))


@pytest.mark.parametrize("name", OPS)
def test_op_has_a_docstring(name):
    assert inspect.getdoc(getattr(sf, name)), f"sf.{name} has no docstring"


def _parameters(fn) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(fn).parameters)


ANY = object()  # any default (or none)

# (function, {keyword: default or inspect.Parameter.empty}) as the contract spells them.
SIGNATURES = [
    ("sf.constant", {"dtype": None, "shape": None}),
    ("sf.convert_to_tensor", {"dtype": None}),
    ("sf.matmul", {"transpose_a": False, "transpose_b": False}),
    ("sf.cast", {"dtype": inspect.Parameter.empty}),
    ("sf.transpose", {"perm": None}),
    ("sf.concat", {"values": inspect.Parameter.empty, "axis": inspect.Parameter.empty}),
    ("sf.gather", {"params": inspect.Parameter.empty, "indices": inspect.Parameter.empty,
                   "axis": 0}),
    ("sf.range", {"start": inspect.Parameter.empty, "limit": None, "delta": 1}),
    ("sf.nn.dropout", {"rate": inspect.Parameter.empty, "training": True}),
    ("sf.nn.conv2d", {"filters": inspect.Parameter.empty, "strides": inspect.Parameter.empty,
                      "padding": inspect.Parameter.empty}),
    ("sf.nn.softmax_cross_entropy_with_logits", {"labels": inspect.Parameter.empty,
                                                  "logits": inspect.Parameter.empty}),
    ("sf.nn.sparse_softmax_cross_entropy_with_logits", {"labels": inspect.Parameter.empty,
                                                         "logits": inspect.Parameter.empty}),
    ("sf.random.set_seed", {}),
    ("sf.random.normal", {"shape": inspect.Parameter.empty, "mean": 0.0, "stddev": 1.0,
                          "dtype": sf.float32, "seed": None}),
    # maxval may default to None meaning 1.0 for floats (TensorFlow's spelling).
    ("sf.random.uniform", {"shape": inspect.Parameter.empty, "minval": 0.0, "maxval": ANY}),
] + [(f"sf.{name}", {"axis": None, "keepdims": False}) for name in REDUCTIONS[:6]]


@pytest.mark.parametrize(("path", "keywords"), SIGNATURES, ids=[p for p, _ in SIGNATURES])
def test_documented_keywords_and_defaults(path, keywords):
    fn = sf
    for part in path.split(".")[1:]:
        fn = getattr(fn, part)
    parameters = _parameters(fn)
    for keyword, default in keywords.items():
        assert keyword in parameters, f"{path} has no parameter {keyword!r}"
        if default is ANY:
            continue
        assert parameters[keyword].default == default, (
            f"{path}: {keyword} defaults to {parameters[keyword].default!r}, not {default!r}"
        )


def test_random_uniform_defaults_to_the_unit_interval():
    values = sf.random.uniform((1000,), seed=3).numpy()
    assert values.dtype == np.float32
    assert values.min() >= 0.0 and values.max() < 1.0 and values.max() > 0.5


def test_reduction_order_of_positional_arguments():
    x = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    assert sf.reduce_sum(x, 0, True).shape == (1, 2)
    assert sf.split(x, 2, 1)[0].shape == (2, 1)
    assert sf.matmul(x, x, True, False).shape == (2, 2)
    assert sf.where(x > 2.0, x, -x).shape == (2, 2)
    assert sf.clip_by_value(x, 1.5, 3.5).shape == (2, 2)
    assert sf.range(1, 7, 2).shape == (3,)


@pytest.mark.parametrize("name", list(DTYPES))
def test_dtypes_exist_and_compare_with_numpy(name):
    dtype = getattr(sf, name)
    assert dtype.name == name
    if DTYPES[name] is not None:
        assert dtype == DTYPES[name]
        assert dtype == np.dtype(DTYPES[name])
    assert sf.constant([0], dtype).dtype == dtype


def test_tensor_dtype_compares_equal_to_sf_dtype_and_name():
    t = sf.constant([1.0])
    assert t.dtype == sf.float32
    assert t.dtype.name == "float32"
    assert sf.constant([1]).dtype.name == "int32"
    assert sf.constant([True]).dtype == sf.bool
    assert sf.constant([True]).dtype.name == "bool"


def test_newaxis_is_none():
    assert sf.newaxis is None


def test_eager_ops_build_no_ir():
    # Every xDSL operation is counted as it is built: eager ops must build none, while
    # asking a staged function for its IR builds some (so the count can fail).
    code = (
        "import xdsl.ir\n"
        "built = []\n"
        "init = xdsl.ir.Operation.__init__\n"
        "def counting(self, *args, **kwargs):\n"
        "    built.append(type(self).__name__)\n"
        "    init(self, *args, **kwargs)\n"
        "xdsl.ir.Operation.__init__ = counting\n"
        "import stageflow as sf\n"
        "x = sf.constant([[1.0, 2.0], [3.0, 4.0]])\n"
        "y = sf.constant(1.) + 1\n"
        "z = sf.reduce_sum(sf.matmul(x, x) * 2.0 - x, axis=0)\n"
        "w = sf.concat([x[0], sf.zeros((2,))], 0)[::2]\n"
        "v = sf.einsum('ij,jk->ik', x, sf.transpose(x)) + sf.eye(2)\n"
        "print(len(built))\n"
        "sf.function(lambda a: a * 2.0).get_concrete_function(x).ir('traced')\n"
        "print(len(built) > 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.split() == ["0", "True"], result.stdout + result.stderr


IMPLEMENTATION = ["core", "frontend", "primitives", "runtime", "models", "staging", "codegen",
                  "ir", "passes", "cli", "testing"]


def test_dir_of_sf_shows_the_api_and_no_internals():
    """What completion offers after ``sf.``: the public names, the lazily imported ones
    too, and neither private helpers (``_eager``) nor the implementation's packages."""
    sf.data  # noqa: B018 - imports stageflow.data, which imports implementation packages
    shown = dir(sf)
    assert not [n for n in shown if n.startswith("_") and not n.startswith("__")], shown
    assert not set(IMPLEMENTATION) & set(shown), set(IMPLEMENTATION) & set(shown)
    assert {"function", "data", "aot", "onnx", "math", "nn", "config", "Variable"} <= set(shown)
    for name in IMPLEMENTATION[:5]:  # still reachable, for the code that uses them
        assert inspect.ismodule(getattr(sf, name))


@pytest.mark.parametrize("path", [*NAMESPACES, *OTHER_NAMESPACES])
def test_no_namespace_shows_private_names(path):
    module = sf
    for part in path.split("."):
        module = getattr(module, part)
    private = [n for n in dir(module) if n.startswith("_") and not n.startswith("__")]
    assert not private, f"sf.{path} shows {private}"
