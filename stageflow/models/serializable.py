"""Keras' serialization registry and object configs: the classes a saved model's config
names (`register_keras_serializable`), and the JSON form of layers and their arguments
(`serialize`, `deserialize`), which `.keras` archives hold (`models.keras_archive`)."""

from __future__ import annotations

import base64
import importlib
import marshal
import types
from collections.abc import Callable
from typing import Any

from stageflow.core.source import describe_location

# "package>name" -> the class (or function) registered under it.
_REGISTERED: dict[str, Any] = {}


def register_keras_serializable(package: str = "Custom", name: str | None = None
                                ) -> Callable[[Any], Any]:
    """A decorator that registers a class (or function) under ``"package>name"`` (`name`
    defaulting to the class's own), so that a saved model naming it loads it back.

    >>> @sf.keras.saving.register_keras_serializable(package="Doc")
    ... class Twice(sf.keras.layers.Layer):
    ...     def call(self, x):
    ...         return 2 * x
    >>> sf.keras.saving.get_registered_name(Twice)
    'Doc>Twice'
    >>> sf.keras.saving.get_registered_object("Doc>Twice") is Twice
    True
    """
    if "|" in package or ">" in package:
        raise ValueError(f"register_keras_serializable: package {package!r} may not contain "
                         f"'>' or '|'{describe_location()}")

    def register(obj: Any) -> Any:
        key = f"{package}>{name if name is not None else obj.__name__}"
        if isinstance(obj, type) and not callable(getattr(obj, "get_config", None)):
            raise ValueError(f"register_keras_serializable: {obj.__name__} must define "
                             f"get_config to be serializable{describe_location()}")
        _REGISTERED[key] = obj
        obj._keras_registered_name = key  # noqa: SLF001 - read by `get_registered_name`
        return obj

    return register


def get_registered_name(obj: Any) -> str:
    """The name `obj` (a class or function) is registered under (``"package>name"``), or
    its own name where it was not registered.

    >>> sf.keras.saving.get_registered_name(sf.keras.layers.Dense)
    'Dense'
    """
    key = obj.__dict__.get("_keras_registered_name") if hasattr(obj, "__dict__") else None
    return key if key is not None and _REGISTERED.get(key) is obj else obj.__name__


def get_registered_object(name: str, custom_objects: dict[str, Any] | None = None,
                          module_objects: dict[str, Any] | None = None) -> Any:
    """The class (or function) registered under `name`, else the one `custom_objects` or
    `module_objects` map it to; None where none is.

    >>> sf.keras.saving.get_registered_object("Nobody>Nothing") is None
    True
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    for table in (custom_objects, module_objects):
        if table and name in table:
            return table[name]
    return None


# -------------------------------------------------------------------------- JSON configs

def serialize(value: Any) -> Any:
    """`value` as JSON data: numbers, strings, None, lists and dicts as they are (tuples as
    lists), an object with ``get_config`` (a layer, a regularizer) as its class's name and
    config."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [serialize(item) for item in value]
    if isinstance(value, dict):
        return {str(key): serialize(item) for key, item in value.items()}
    if callable(getattr(value, "get_config", None)):
        cls = type(value)
        return {"module": cls.__module__, "class_name": cls.__name__,
                "registered_name": get_registered_name(cls),
                "config": serialize(value.get_config())}
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a NumPy scalar
        return value.item()
    if isinstance(value, types.FunctionType):
        return _function(value)
    if callable(value) and hasattr(value, "__qualname__"):  # a builtin or a NumPy ufunc
        return {"module": getattr(value, "__module__", None) or "",
                "function_name": value.__qualname__}
    raise TypeError(f"sf.keras saving: cannot serialize {type(value).__name__} {value!r}: "
                    f"give the layer a get_config returning numbers, strings, lists, dicts "
                    f"and layers{describe_location()}")


def _function(function: types.FunctionType) -> dict[str, Any]:
    """A function as JSON: by its module and name (found again on loading among the
    registered, the custom and stageflow's own objects), or a lambda by its code, as Keras
    writes one (bytecode, loaded only where the caller trusts the file: ``safe_mode=False``)."""
    if function.__name__ != "<lambda>":
        return {"module": _home(function), "function_name": function.__qualname__,
                "registered_name": get_registered_name(function)}
    if function.__closure__:
        raise TypeError(f"sf.keras saving: cannot serialize a lambda that reads variables "
                        f"of its enclosing function; define it at module level"
                        f"{describe_location()}")
    code = base64.b64encode(marshal.dumps(function.__code__)).decode("ascii")
    return {"lambda": code, "defaults": serialize(function.__defaults__),
            "module": function.__module__}


# Where stageflow's public functions are found by name, for those whose own module does not
# hold them under their name (made by a factory, or defined where they are not exported).
_NAMESPACES = ("stageflow", "stageflow.nn", "stageflow.math", "stageflow.random",
               "stageflow.linalg", "stageflow.keras.activations")


def _home(function: types.FunctionType) -> str:
    """The module `function` is loaded from again: its own where that holds it under its
    name, else the first of stageflow's namespaces that does."""
    for module in (function.__module__, *_NAMESPACES):
        try:
            if getattr(importlib.import_module(module), function.__qualname__, None) is function:
                return module
        except ImportError:
            continue
    return function.__module__


def _load_function(data: dict[str, Any], custom_objects: dict[str, Any] | None,
                   safe_mode: bool) -> Any:
    """The function `_function` wrote."""
    if "lambda" in data:
        if safe_mode:
            raise ValueError(f"sf.keras saving: the file holds a lambda, whose loading runs "
                             f"its code: load it with safe_mode=False if you trust it"
                             f"{describe_location()}")
        module = importlib.import_module(data["module"]) if data["module"] else None
        code = marshal.loads(base64.b64decode(data["lambda"]))
        defaults = data.get("defaults")
        return types.FunctionType(code, vars(module) if module else {}, None,
                                  None if defaults is None else tuple(defaults))
    name = data["function_name"]
    found = (get_registered_object(data.get("registered_name", name), custom_objects)
             or get_registered_object(name, custom_objects))
    if found is None and (data["module"] == "stageflow" or
                          data["module"].startswith("stageflow.") or data["module"] in (
                              "numpy", "builtins")):
        found = importlib.import_module(data["module"])
        for part in name.split("."):
            found = getattr(found, part, None)
    if found is None:
        raise ValueError(f"sf.keras saving: unknown function {name!r} (of {data['module']}):"
                         f" register it with @sf.keras.saving.register_keras_serializable(), "
                         f"or pass it in custom_objects{describe_location()}")
    return found


def deserialize(data: Any, custom_objects: dict[str, Any] | None = None,
                safe_mode: bool = True) -> Any:
    """The value `serialize` wrote: an object's class is found by its registered name (see
    `register_keras_serializable`), in `custom_objects`, or among stageflow's own; a
    lambda's code is loaded only where `safe_mode` is off."""
    if isinstance(data, list):
        return [deserialize(item, custom_objects, safe_mode) for item in data]
    if not isinstance(data, dict):
        return data
    if "function_name" in data or "lambda" in data:
        return _load_function(data, custom_objects, safe_mode)
    if set(data) != {"module", "class_name", "registered_name", "config"}:
        return {key: deserialize(item, custom_objects, safe_mode) for key, item in data.items()}
    cls = _find_class(data, custom_objects)
    config = deserialize(data["config"], custom_objects, safe_mode)
    return cls.from_config(config) if hasattr(cls, "from_config") else cls(**config)


def _find_class(data: dict[str, Any], custom_objects: dict[str, Any] | None) -> Any:
    found = (get_registered_object(data["registered_name"], custom_objects)
             or get_registered_object(data["class_name"], custom_objects))
    if found is not None:
        return found
    module = data["module"]
    if module == "stageflow" or module.startswith("stageflow."):  # never another package's
        found = getattr(importlib.import_module(module), data["class_name"], None)
    if found is None:
        raise ValueError(f"sf.keras saving: unknown class {data['registered_name']!r} (of "
                         f"{module}): register it with "
                         f"@sf.keras.saving.register_keras_serializable(), or pass it in "
                         f"custom_objects{describe_location()}")
    return found
