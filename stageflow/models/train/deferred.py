"""Values a restore keeps for objects that do not exist yet, applied when they appear.

A layer creates its variables on its first call and an optimizer its slots on its first
step, often after `restore` ran. The restore leaves a handler here, keyed weakly by the
parent object (a module, a checkpoint, an optimizer): `sf.Module.__setattr__` calls
`attribute_set` and `Optimizer.add_slot` calls `slot_created`, and the handler matches the
new object against the checkpoint's node and restores it. Nothing here imports the rest of
stageflow, so the modules that report new objects can import it without a cycle.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

AttributeHandler = Callable[[Any], None]
SlotHandler = Callable[[Any, str, Any], bool]

# parent -> {edge name: handler(new child)}
_attributes: weakref.WeakKeyDictionary[Any, dict[str, AttributeHandler]] = (
    weakref.WeakKeyDictionary())
# optimizer -> [handler(variable, slot name, slot) -> whether it restored the slot]
_slots: weakref.WeakKeyDictionary[Any, list[SlotHandler]] = weakref.WeakKeyDictionary()


def _key(parent: Any) -> Any:
    """What `parent` is keyed by: itself, or for an unhashable container that reports its
    new elements (a list, a dict), the key object it holds for that."""
    return getattr(parent, "_checkpoint_key", parent)


def expect_attribute(parent: Any, name: str, handler: AttributeHandler) -> None:
    """Call `handler(value)` when ``parent.<name>`` is next assigned (a later restore of the
    same edge replaces an earlier one's handler, as the later restore's values win)."""
    _attributes.setdefault(_key(parent), {})[name] = handler


def attribute_set(parent: Any, name: str, value: Any) -> None:
    """``parent.<name> = value`` just happened: restore `value` if a restore waits for it."""
    if not _attributes:
        return
    key = _key(parent)
    waiting = _attributes.get(key)
    if waiting is None or name not in waiting:
        return
    handler = waiting.pop(name)
    if not waiting:
        del _attributes[key]
    handler(value)


def expect_slots(optimizer: Any, handler: SlotHandler) -> None:
    """Offer every slot `optimizer` creates from now on to `handler` (newest restore first)."""
    _slots.setdefault(optimizer, []).insert(0, handler)


def slot_created(optimizer: Any, variable: Any, slot_name: str, slot: Any) -> None:
    """`optimizer` created `slot` for `variable`: restore it if a restore holds its value."""
    if not _slots:
        return
    for handler in _slots.get(optimizer, ()):
        if handler(variable, slot_name, slot):
            return
