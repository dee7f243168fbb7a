"""The config of a functional model (``sf.keras.Model(inputs, outputs)``): its inputs, its
layers, and each layer call with the values it took and returned, from which the model is
made again (`from_config`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stageflow.core import nest
from stageflow.core.source import describe_location
from stageflow.models.layers import symbolic
from stageflow.models.layers.base import Layer

if TYPE_CHECKING:
    from stageflow.models.training import Model

_REF = "__keras_tensor__"  # a value of the graph, by its number, in a call's arguments


def get_config(model: Model) -> dict[str, Any]:
    """The config of `model`, whose `_graph` is its layer calls."""
    graph = model._graph  # noqa: SLF001 - the model's own graph
    numbers = {id(t): i for i, t in enumerate(graph.input_leaves)}

    def refs(structure: Any) -> Any:
        leaves, treedef = nest.flatten(structure)
        return nest.unflatten(treedef, [{_REF: numbers[id(leaf)]}
                                        if isinstance(leaf, symbolic.KerasTensor) else leaf
                                        for leaf in leaves])

    layers: list[Layer] = []
    calls = []
    for node in graph.nodes:
        if not isinstance(node.fn, Layer):
            raise TypeError(f"{type(model).__name__}.get_config: the functional model calls "
                            f"{getattr(node.fn, '__name__', node.fn)!r}, not a layer: wrap it "
                            f"in sf.keras.layers.Lambda to save the model{describe_location()}")
        if all(layer is not node.fn for layer in layers):
            layers.append(node.fn)
        index = next(i for i, layer in enumerate(layers) if layer is node.fn)
        args, kwargs = refs(list(node.args)), refs(node.kwargs)
        for leaf in nest.flatten(node.outputs)[0]:
            numbers[id(leaf)] = len(numbers)
        calls.append({"layer": index, "args": args, "kwargs": kwargs,
                      "outputs": refs(node.outputs)})
    return {"name": model.name, "trainable": model.trainable,
            "inputs": refs(graph.inputs),
            "input_layers": [{"shape": list(t.shape[1:]), "batch_size": t.shape[0],
                              "dtype": t.dtype.name, "name": t.name}
                             for t in graph.input_leaves],
            "layers": layers, "calls": calls, "outputs": refs(graph.outputs)}


def is_functional(config: dict[str, Any]) -> bool:
    """Whether `config` is one `get_config` made."""
    return {"inputs", "input_layers", "layers", "calls", "outputs"} <= set(config)


def from_config(cls: type[Model], config: dict[str, Any]) -> Model:
    """A new model of class `cls` from a `get_config` config (its layers already made):
    the layers are called again, in order, on new inputs."""
    values: list[Any] = [symbolic.Input(tuple(spec["shape"]), batch_size=spec["batch_size"],
                                        dtype=spec["dtype"], name=spec["name"])
                         for spec in config["input_layers"]]

    def resolve(structure: Any) -> Any:
        if isinstance(structure, dict) and set(structure) == {_REF}:
            return values[structure[_REF]]
        if isinstance(structure, list):
            return [resolve(item) for item in structure]
        if isinstance(structure, dict):
            return {key: resolve(item) for key, item in structure.items()}
        return structure

    for call in config["calls"]:
        result = config["layers"][call["layer"]](*resolve(call["args"]),
                                                 **resolve(call["kwargs"]))
        values.extend(nest.flatten(result)[0])
    rest = {k: v for k, v in config.items()
            if k not in ("inputs", "input_layers", "layers", "calls", "outputs")}
    return cls(resolve(config["inputs"]), resolve(config["outputs"]), **rest)
