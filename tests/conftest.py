"""Shared test configuration: hypothesis profiles, the import path for `strategies`, and
the eager/staged execution modes of the op tests, and headless Chromium for the tests
that look at pages (`chromium`).

Every test in the op-set modules listed in `STAGED_MODULES` runs twice: eagerly, and with
every op traced into its own graph function, verified as `sf` dialect IR and interpreted
(`staged_modes.stage_each_op`), so eager and staged execution must give the same numbers.

The folders mirror the package (`tests/passes/` tests `stageflow/passes/`; tests of the
whole package sit here at the root). They are not packages: pytest's default import mode
imports each test module by its file name, so test file names are unique across folders,
and the shared helpers here (`strategies`, `staged_modes`) import the same from any folder.

The suite runs on two processes (pytest-xdist's ``-n 2``, in pyproject's addopts; ``-n 0``
runs it in one). Their tests share one compilation cache, so a kernel compiled by one is a
cache hit for the other. Tests marked ``exclusive`` (training loops in child processes,
timings, thread races, campaigns with timeouts) run while the other process waits between
its tests, so that they have the cores to themselves as in a run of one process (see
`cores`); ``xdist_group`` keeps a file's tests in one process where they share a costly
fixture or a cluster.

Profiles (pick one with ``HYPOTHESIS_PROFILE=name``):

- ``ci`` (the default): derandomized, no deadline, few examples, no example database, so the
  suite is reproducible and fast on a small machine.
- ``dev``: random, more examples, for hunting bugs locally.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import stageflow as sf

# Four logical CPU devices and one emulated GPU (after any real ones) for the whole suite, so
# that placement, copies between devices, concurrent devices and the GPU device's logic are
# tested on any machine (tests/runtime/test_devices.py, test_gpu.py).
sf.config.set_logical_device_count("CPU", 4)
sf.config.set_emulated_gpu_count(1)

# `import strategies` from any test module, whether or not `tests` becomes a package.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The processes the tests start (campaign cases, examples, the CLI, compile servers) import
# stageflow afresh: with Python's bytecode cache on, the first writes it and the others
# read it, where ``PYTHONDONTWRITEBYTECODE`` would have each compile every module again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The suite's processes and those they start compile without a compile server: the suite's
# two processes keep both cores busy already. (The server's tests start their own.)
os.environ["STAGEFLOW_PARALLEL_COMPILE"] = "0"
sf.config.parallel_compile = False

# The execution-mode fixture wraps the whole test, the same for every example.
SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large,
              HealthCheck.function_scoped_fixture]

# The suite's profile: the same ten examples of each property on every run (most of the
# suite's properties run per primitive, per dtype or per pass); ``HYPOTHESIS_PROFILE=dev``
# draws 300 fresh ones.
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=10,
    print_blob=True,
    suppress_health_check=SUPPRESSED,
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=300,
    suppress_health_check=SUPPRESSED,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Module names (file names without ".py"), all in tests/primitives/.
STAGED_MODULES = {
    "test_creation", "test_indexing", "test_linalg", "test_nn", "test_random",
    "test_reductions", "test_shape_ops",
}


def shared_temp(tmp_path_factory) -> Path:
    """The run's temporary folder that every process of the run sees: the parent of each
    pytest-xdist worker's own, else the run's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


@pytest.fixture(autouse=True, scope="session")
def compilation_cache(tmp_path_factory):
    """Compiled kernels are cached in a fresh directory of this run, shared by its processes
    (and by test subprocesses), never in the user's cache."""
    from stageflow.core import config

    directory = shared_temp(tmp_path_factory) / "compilation-cache"
    directory.mkdir(exist_ok=True)
    directory = str(directory)
    saved = config.cache_dir, os.environ.get("STAGEFLOW_CACHE_DIR")
    config.cache_dir = os.environ["STAGEFLOW_CACHE_DIR"] = directory
    yield directory
    config.cache_dir = saved[0]
    if saved[1] is None:
        os.environ.pop("STAGEFLOW_CACHE_DIR", None)
    else:
        os.environ["STAGEFLOW_CACHE_DIR"] = saved[1]


class CoreLock:
    """A readers-writer lock over the run's processes, on two `flock`ed files: a test holds
    the tests file shared (with the other process's test), an exclusive test holds it alone.
    An exclusive test holds the turnstile from before it waits for the shared holders until
    it ends, and every test passes the turnstile before it takes the tests file, so that the
    other process cannot start test after test ahead of a waiting exclusive one. A run of
    exclusive tests keeps the lock from one to the next (`pytest_runtest_teardown`), so
    that the other process's test between them does not make each wait again."""

    def __init__(self, folder: Path) -> None:
        self.turnstile = os.open(folder / "core-lock-turnstile", os.O_RDWR | os.O_CREAT)
        self.tests = os.open(folder / "core-lock-tests", os.O_RDWR | os.O_CREAT)
        self.held: bool | None = None  # exclusively or shared; None: not held

    def hold(self, exclusive: bool) -> None:
        """Hold the lock for a test, `exclusive` or shared, unless it is held so already."""
        if self.held is exclusive:
            return
        self.release()
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        fcntl.flock(self.tests, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.held = exclusive

    def release(self) -> None:
        if self.held is None:
            return
        fcntl.flock(self.tests, fcntl.LOCK_UN)
        if self.held:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.held = None


_core_locks: list[CoreLock] = []


@pytest.fixture(scope="session")
def core_lock(tmp_path_factory):
    """The run's `CoreLock` under pytest-xdist; None in a run of one process."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    _core_locks.append(CoreLock(shared_temp(tmp_path_factory)))
    return _core_locks[-1]


def _exclusive(item: pytest.Item) -> bool:
    return item.get_closest_marker("exclusive") is not None


@pytest.fixture(autouse=True)
def cores(request, core_lock):
    """Under pytest-xdist, each test holds the run's `CoreLock`: shared, or alone where it
    is marked ``exclusive``. Such a test's timings, timeouts and split ops' worker threads
    then see the cores free of the other process's tests (a split op's caller waits for its
    workers' tasks; with another process's threads on the cores, a training loop of many
    split ops ran ten times slower). `pytest_runtest_teardown` releases it."""
    if core_lock is not None:
        core_lock.hold(_exclusive(request.node))
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test's fixtures are torn down, release the `CoreLock` unless this test and
    the next are both exclusive."""
    try:
        return (yield)
    finally:
        for lock in _core_locks:
            if not (lock.held and nextitem is not None and _exclusive(nextitem)):
                lock.release()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Exclusive tests run in one process, one after another (an ``xdist_group`` of their
    own, unless a test is in a group already): together, they wait for the other process's
    current test once, not each for one of its own. Tests marked ``slow``, and the groups
    holding one, come first, in their order (pytest-xdist hands out tests and groups in
    collection order): the longest jobs started first, the short ones fill in at the end,
    and the two processes end at about the same time, where a slow test handed out last
    kept one process running alone. The exclusive group stays in its place: among slow
    tests, each of its tests would wait for a long one."""
    for item in items:
        if _exclusive(item) and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group("exclusive"))
    slow = {_unit(item) for item in items if item.get_closest_marker("slow") is not None}
    slow.discard("exclusive")
    items.sort(key=lambda item: _unit(item) not in slow)


def _unit(item: pytest.Item) -> str:
    """What pytest-xdist hands out whole: the test's group, else the test."""
    group = item.get_closest_marker("xdist_group")
    return group.args[0] if group is not None else item.nodeid


@pytest.fixture(autouse=True)
def module_generators(request):
    """A test module's shared NumPy generator (`RNG` or `rng` at its top) starts each test
    in a state of that test's own, seeded by its name: its inputs are then the same however
    the run orders and distributes the tests, where they used to depend on which tests of
    the module the process ran before. Reseeded in place, so that defaults bound to it see
    the new state too."""
    for name in ("RNG", "rng"):
        generator = getattr(request.module, name, None)
        if isinstance(generator, np.random.Generator):
            seed = zlib.crc32(request.node.nodeid.split("@")[0].encode())
            generator.bit_generator.state = np.random.default_rng(seed).bit_generator.state
    yield


@pytest.fixture(autouse=True)
def execution_mode(request):
    """"eager" by default; "staged" runs each op as a traced, verified graph function."""
    if getattr(request, "param", "eager") == "staged":
        from staged_modes import stage_each_op

        with stage_each_op():
            yield "staged"
    else:
        yield "eager"


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__.rpartition(".")[2] in STAGED_MODULES:
        metafunc.parametrize("execution_mode", ["eager", "staged"], indirect=True)


# -- headless Chromium, for the tests that look at pages (the report, TensorBoard) ----------


def announce(config: pytest.Config, message: str) -> None:
    """`message` on the terminal at once, past pytest's capture (an install takes a minute;
    a worker of ``pytest -n`` writes there too)."""
    with config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n[stageflow tests] {message}", file=sys.stderr, flush=True)


def apt_install(package: str) -> subprocess.CompletedProcess:
    """``apt-get install -y PACKAGE``, after ``apt-get update`` where the package lists do
    not know it yet (a fresh machine's are empty). One install at a time on the machine:
    pytest's worker processes may each need a package at once, and dpkg takes one."""
    command = ["apt-get", "install", "-y", "-q", package]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(os.path.join(tempfile.gettempdir(), "stageflow-tests-apt.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
            result = subprocess.run(command, capture_output=True, text=True, env=env)
    return result


@pytest.fixture(scope="session")
def chromium(pytestconfig) -> str:
    """The Chromium binary. Where it is missing, Debian's chromium package is installed,
    announced on the terminal, so that the suite's one command is all a fresh machine needs;
    where it cannot be (no apt-get, not root, no network) the test fails with apt's words.
    ``STAGEFLOW_NO_BROWSER=1`` is the explicit way out: the test is skipped, naming it."""
    if os.environ.get("STAGEFLOW_NO_BROWSER") == "1":
        pytest.skip("STAGEFLOW_NO_BROWSER=1 was set: pages were not checked in a browser")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if shutil.which("apt-get") is None:
        pytest.fail("Chromium is not installed and there is no apt-get to install it with: "
                    "install Chromium, or set STAGEFLOW_NO_BROWSER=1 to skip this test")
    announce(pytestconfig, "Chromium is missing: installing Debian's chromium package "
             "(apt-get install -y chromium) for the browser tests")
    result = apt_install("chromium")
    found = shutil.which("chromium")
    if result.returncode != 0 or not found:
        pytest.fail("Chromium could not be installed (apt-get install -y chromium, exit "
                    f"{result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}\n"
                    "Install Chromium, or set STAGEFLOW_NO_BROWSER=1 to skip this test")
    announce(pytestconfig, f"Chromium installed ({found}) for the browser tests")
    return found


# -- cross toolchains, for libraries compiled for other machines (aarch64, WebAssembly) ----


def debian_tools(config: pytest.Config, needs: dict[str, str], purpose: str) -> None:
    """Make sure every program or file of `needs` (each mapped to the Debian package that
    has it) is here: the missing ones' packages are installed and announced, as the
    browser's is; where that fails the test fails with apt's words."""
    def present(need: str) -> bool:
        return os.path.exists(need) if need.startswith("/") else shutil.which(need) is not None

    missing = sorted({package for need, package in needs.items() if not present(need)})
    if not missing:
        return
    if shutil.which("apt-get") is None:
        pytest.fail(f"{purpose} needs Debian's {', '.join(missing)}, and there is no apt-get "
                    "to install them with")
    announce(config, f"{purpose}: installing Debian's {', '.join(missing)}")
    for package in missing:
        result = apt_install(package)
        if result.returncode != 0:
            pytest.fail(f"{package} could not be installed (apt-get install -y {package}, exit "
                        f"{result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}")
    still = [need for need in needs if not present(need)]
    if still:
        pytest.fail(f"{purpose}: {', '.join(still)} still missing after installing "
                    f"{', '.join(missing)}")


@pytest.fixture(scope="session")
def aarch64_tools(pytestconfig) -> None:
    """The aarch64 cross compiler with its system root, and qemu's user-mode emulator."""
    debian_tools(pytestconfig, {"aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu",
                                "/usr/aarch64-linux-gnu/lib/libc.so.6": "libc6-arm64-cross",
                                "qemu-aarch64": "qemu-user"},
                 "running aarch64 libraries under qemu")


@pytest.fixture(scope="session")
def wasm_tools(pytestconfig) -> None:
    """LLVM's WebAssembly linker, the WASI C library it links against, and Node.js."""
    debian_tools(pytestconfig, {"wasm-ld": "lld", "/usr/lib/wasm32-wasi/libc.a": "wasi-libc",
                                "node": "nodejs"},
                 "running WebAssembly libraries")
