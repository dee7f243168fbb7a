"""Observability settings: one place, set from the environment or from Python.

- ``STAGEFLOW_DUMP_DIR=DIR`` (or ``sf.config.dump_dir = "DIR"``): every compiled function
  writes its IR at each stage and after each pass into DIR, one file per function and
  stage, numbered so that the files sort in pipeline order (as XLA's ``--xla_dump_to``).
- ``STAGEFLOW_REPORT_DIR=DIR`` (or ``sf.config.report_dir``): every compile (staged
  functions, staged gradients, loaded saved functions, ahead-of-time libraries) writes an
  HTML page explaining it into DIR (`stageflow.staging.report`), numbered as the dumps.
- ``STAGEFLOW_LOG=compiles,retraces,passes`` (or ``sf.config.log = {...}``): one line on
  stderr per trace and compilation with its time (``compiles``), per cache miss with its
  reason (``retraces``), per pass with its time (``passes``).
- ``STAGEFLOW_REMAT=0`` (or ``sf.config.remat = False``): gradients of staged functions
  under an eager tape keep every residual the backward reads instead of recomputing the
  cheap ones (the `remat` pass); for measuring what rematerialisation saves.
- ``STAGEFLOW_VERIFY=each`` (or ``sf.config.verify = "each"``): compiles verify the IR after
  every pass, naming the pass that broke an invariant, instead of once after the last pass
  (``end``, the default, as MLIR's ``-verify-each=0``: a verification costs about what a
  pass does); ``none`` skips it.
- ``STAGEFLOW_PARALLEL_COMPILE=0`` (or ``sf.config.parallel_compile = False`` before the
  first compile): LLVM compiles in this process only. By default, on machines of more
  than one core, a compile server (a second Python process running LLVM alone, spawned at
  the first compile) makes object code beside the process's own compiler thread, so that
  two modules compile at once: a staged training step's first call, cold, takes about a
  third less time.
- ``STAGEFLOW_EAGER_COMPILE=0`` (or ``sf.config.eager_compile = False``): eager
  convolutions and large sums keep NumPy's kernels instead of the compiled ones,
  composites (batch norm) run their ops one by one instead of as one staged function, and
  a recurring tape's gradient rules run one by one instead of as its compiled backward
  pass (all compiled in the background, see `stageflow.runtime.eager_kernels`,
  `stageflow.models.composite` and `stageflow.models.backward_runner`), so that an eager
  program's numbers never depend on when a compile finished.
- ``STAGEFLOW_MALLOC=default``: glibc's malloc keeps its own thresholds; by default the
  runtime fixes them at import so that large arrays freed and allocated again at every
  eager step stay in the heap instead of being page-faulted in each time
  (`stageflow.runtime.allocator`).
- ``STAGEFLOW_LAUNCH_GRAPHS=0`` (or ``sf.config.launch_graphs = False``): staged functions
  on a GPU always run as their plan of launches, never replayed as one recorded graph
  (`stageflow.runtime.gpu_graphs`); for measuring what the graphs save.
- `set_logical_device_count("CPU", n)` (before the devices are first used) splits the CPU
  into n devices; `set_emulated_gpu_count(n)` adds n GPUs emulated on the CPU (their
  kernels the PTX kernels' LLVM IR over emulated grids: for testing, slow);
  `statistics()` counts copies between devices (``device_copies``, ``device_copy_bytes``)
  since `reset_statistics()`; `get_memory_info(device)` gives the bytes a device's
  tensors hold (``current``) and held at most (``peak``), as TensorFlow's;
  `set_soft_device_placement(False)` makes ``sf.device("GPU:0")`` without that GPU an
  error instead of running the block on the CPU (`get_soft_device_placement()`).
- `threading.set_intra_op_parallelism_threads(n)` (TensorFlow's name): one op uses at
  most n cores, compiled ops' tasks and OpenBLAS's threads alike (`config_threading`).
- `list_physical_devices`, `list_logical_devices`, `get_visible_devices` and
  `experimental.set_memory_growth`: TensorFlow's device listings and setting
  (`stageflow.core.device_listing`).
- `run_functions_eagerly(True)` (TensorFlow's name): every `sf.function` calls its Python
  function as it is, op by op, eagerly, instead of a staged graph: ``pdb`` and ``print``
  work inside it and the numbers are eager's; `functions_run_eagerly()` tells the setting.
- `set_precision_policy("mixed_bfloat16")` (Keras' ``set_global_policy``): layers created
  from then on compute in bfloat16 and keep float32 variables; `get_precision_policy()`
  tells the policy (`stageflow.core.precision`, ``sf.keras.mixed_precision``).
- ``STAGEFLOW_CACHE_DIR=DIR`` (or ``sf.config.cache_dir``): where compiled kernels are kept
  between processes (default ``$XDG_CACHE_HOME/stageflow``, else ``~/.cache/stageflow``);
  ``STAGEFLOW_CACHE=0`` (or ``sf.config.cache = False``) turns that cache off.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import warnings
from typing import Any

from stageflow.core import config_experimental as experimental
from stageflow.core import config_threading as threading
from stageflow.core import devices
from stageflow.core.device_listing import (
    LogicalDevice,
    LogicalDeviceConfiguration,
    PhysicalDevice,
    get_logical_device_configuration,
    get_visible_devices,
    list_logical_devices,
    list_physical_devices,
    set_logical_device_configuration,
)
from stageflow.core.exports import public_dir
from stageflow.core.precision import global_policy as get_precision_policy
from stageflow.core.precision import set_global_policy as set_precision_policy

# The settings and functions of `sf.config`; the rest (`emit`, `dump`, ...) is the
# compiler's and the runtime's, hidden from `dir(sf.config)`.
__all__ = ["LogicalDevice", "LogicalDeviceConfiguration", "PhysicalDevice", "cache",
           "cache_dir", "dump_dir", "get_logical_device_configuration",
           "set_logical_device_configuration",
           "eager_compile", "emulated_gpu_count", "experimental", "functions_run_eagerly",
           "get_memory_info", "get_precision_policy", "get_soft_device_placement",
           "get_visible_devices",
           "launch_graphs", "list_logical_devices", "list_physical_devices", "log",
           "logical_device_count", "parallel_compile", "remat", "report_dir",
           "reset_statistics", "run_functions_eagerly", "set_emulated_gpu_count",
           "set_logical_device_count", "set_precision_policy", "set_soft_device_placement",
           "statistics", "threading", "verify"]
__dir__ = public_dir(globals())

VERSION = "0.1.0"

LOG_CATEGORIES = frozenset({"compiles", "retraces", "passes"})

functions_eager = False  # `run_functions_eagerly`


def run_functions_eagerly(run_eagerly: bool) -> None:
    """Run every `sf.function` as its plain Python function (True), or staged (False, the
    default), to step through one with a debugger.

    >>> @sf.function
    ... def double(x):
    ...     print("x =", x)            # Python's print: as it traces, or every eager call
    ...     return x * 2
    >>> sf.config.run_functions_eagerly(True)
    >>> double(sf.constant(3))
    x = sf.Tensor(3, shape=(), dtype=int32)
    sf.Tensor(6, shape=(), dtype=int32)
    >>> sf.config.run_functions_eagerly(False)
    """
    global functions_eager
    functions_eager = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    """Whether `run_functions_eagerly(True)` is in force.

    >>> sf.config.functions_run_eagerly()
    False
    """
    return functions_eager

dump_dir: str | None = os.environ.get("STAGEFLOW_DUMP_DIR") or None
report_dir: str | None = os.environ.get("STAGEFLOW_REPORT_DIR") or None
log: set[str] = {c.strip() for c in os.environ.get("STAGEFLOW_LOG", "").split(",") if c.strip()}


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "stageflow")


cache: bool = os.environ.get("STAGEFLOW_CACHE", "1").strip().lower() not in {
    "0", "false", "no", "off"}
cache_dir: str = os.environ.get("STAGEFLOW_CACHE_DIR") or _default_cache_dir()

remat: bool = os.environ.get("STAGEFLOW_REMAT", "1") != "0"

verify: str = os.environ.get("STAGEFLOW_VERIFY", "end").strip() or "end"

parallel_compile: bool = os.environ.get("STAGEFLOW_PARALLEL_COMPILE", "1") != "0"

eager_compile: bool = os.environ.get("STAGEFLOW_EAGER_COMPILE", "1") != "0"

launch_graphs: bool = os.environ.get("STAGEFLOW_LAUNCH_GRAPHS", "1") != "0"

_dump_counter = itertools.count()
_checked_log: set[str] | None = None


def _check_log(categories: set[str]) -> None:
    """Warn once about categories of `log` that no line is printed for (a typo would
    otherwise silence the very lines asked for)."""
    global _checked_log
    _checked_log = categories
    unknown = sorted(categories - LOG_CATEGORIES - {"all"})
    if unknown:
        known = ", ".join(sorted(LOG_CATEGORIES | {"all"}))
        warnings.warn(f"STAGEFLOW_LOG / sf.config.log: unknown categories {unknown} "
                      f"(known: {known})", stacklevel=3)


def logging(category: str) -> bool:
    """Whether lines of `category` are printed (``all`` turns every category on)."""
    if category not in LOG_CATEGORIES:
        raise ValueError(f"no log category {category!r}")
    if log is not _checked_log:
        _check_log(log)
    return category in log or "all" in log


def emit(category: str, message: str) -> None:
    """Print one log line for `category` if it is on."""
    if logging(category):
        print(f"stageflow[{category}] {message}", file=sys.stderr, flush=True)


def report_path(function: str) -> str:
    """``DIR/NNNN.FUNCTION.html`` in the report directory (created)."""
    assert report_dir
    os.makedirs(report_dir, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", function)
    return os.path.join(report_dir, f"{next(_dump_counter):04d}.{safe}.html")


def dump(function: str, stage: str, text: str) -> None:
    """Write `text` as ``DIR/NNNN.FUNCTION.STAGE.mlir`` when a dump directory is set."""
    if not dump_dir:
        return
    os.makedirs(dump_dir, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{function}.{stage}")
    path = os.path.join(dump_dir, f"{next(_dump_counter):04d}.{safe}.mlir")
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


set_logical_device_count = devices.set_logical_device_count
logical_device_count = devices.logical_device_count
set_emulated_gpu_count = devices.set_emulated_gpu_count
emulated_gpu_count = devices.emulated_gpu_count
set_soft_device_placement = devices.set_soft_device_placement
get_soft_device_placement = devices.get_soft_device_placement


def statistics() -> dict[str, Any]:
    """Counters of the runtime's work since the last `reset_statistics`: copies between
    devices (``device_copies``) and their bytes (``device_copy_bytes``), and ops placed on
    a GPU that ran on the host, their operands fetched, as no GPU kernel takes them
    (``host_fallbacks``, TensorFlow's soft placement), ints. A copy is made when an op
    runs on a device its operands are not on, so the counters show placement mistakes that
    cost time.

    >>> sf.config.reset_statistics()
    >>> x = sf.constant([1.0, 2.0, 3.0])                # on /device:CPU:0
    >>> with sf.device("/device:CPU:2"):
    ...     y = x * 2.0                                 # x is copied to CPU:2 first
    >>> sf.config.statistics()
    {'device_copies': 1, 'device_copy_bytes': 12, 'host_fallbacks': 0}
    """
    counters = devices.COUNTERS
    with counters.lock:
        return {"device_copies": counters.copies, "device_copy_bytes": counters.copy_bytes,
                "host_fallbacks": counters.host_fallbacks}


def reset_statistics() -> None:
    """Zero the counters of `statistics` and the peaks of `get_memory_info` (a peak becomes
    the current usage), to measure one part of a program.

    >>> with sf.device("/device:CPU:1"):
    ...     y = sf.constant([1.0, 2.0]) * 2.0
    >>> sf.config.reset_statistics()
    >>> sf.config.statistics()
    {'device_copies': 0, 'device_copy_bytes': 0, 'host_fallbacks': 0}
    >>> info = sf.config.get_memory_info("/device:CPU:1")
    >>> info["peak"] == info["current"]
    True
    """
    counters = devices.COUNTERS
    with counters.lock:
        counters.copies = counters.copy_bytes = counters.host_fallbacks = 0
        for usage in counters.memory.values():
            usage[1] = usage[0]


def get_memory_info(device: str) -> dict[str, int]:
    """``{"current": bytes, "peak": bytes}`` held by the tensors placed on `device`.

    Counted for every device but ``/device:CPU:0``, whose tensors are plain NumPy arrays
    that the eager fast path never stops to count (a ValueError says so). The bytes are
    those of the tensors' arrays: a float32 tensor of 256 elements holds 1024.

    >>> before = sf.config.get_memory_info("/device:CPU:1")["current"]
    >>> with sf.device("/device:CPU:1"):
    ...     y = sf.range(256.0) * 2.0
    >>> sf.config.get_memory_info("/device:CPU:1")["current"] - before
    1024
    >>> del y                                           # its memory is freed
    >>> sf.config.get_memory_info("/device:CPU:1")["current"] - before
    0
    """
    name = devices.resolve(device)
    if name == devices.HOST:
        raise ValueError("memory of /device:CPU:0 is not counted: its tensors are plain "
                         "NumPy arrays; split the CPU with "
                         "sf.config.set_logical_device_count and use another device")
    with devices.COUNTERS.lock:
        current, peak = devices.COUNTERS.memory.get(name, (0, 0))
    return {"current": current, "peak": peak}

