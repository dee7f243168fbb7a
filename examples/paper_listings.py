"""The listings of the TensorFlow Eager paper, written with stageflow, printing what the
paper says they print. Listings 4-5 place tensors on a GPU where one exists, else on a
second (logical) CPU device.

    python examples/paper_listings.py
"""

from __future__ import annotations

import numpy as np

import stageflow as sf


def section_4_1_select() -> None:
    """Imperative execution: ops run at once and return concrete tensors."""

    def select(vector):
        A = sf.constant([[1.0, 0.0]])
        return sf.matmul(A, vector)

    x = sf.constant([[2.0], [-2.0]])
    print("select(x) =", select(x))
    print("staged    =", sf.function(select)(x))


def listing_1() -> None:
    """Tapes nest to compute higher-order derivatives."""
    x = sf.constant(3.0)
    with sf.GradientTape() as t1:
        with sf.GradientTape() as t2:
            t1.watch(x)
            t2.watch(x)
            y = x * x
        dy_dx = t2.gradient(y, x)  # 6.0
    d2y_dx2 = t1.gradient(dy_dx, x)  # 2.0
    print(f"listing 1: dy_dx = {float(dy_dx)}, d2y_dx2 = {float(d2y_dx2)}")


def listing_2() -> None:
    """Gradient tapes automatically watch variables."""
    x = sf.Variable(3.0)
    with sf.GradientTape() as t1:
        with sf.GradientTape() as t2:
            y = x * x
        dy_dx = t2.gradient(y, x)  # 6.0
    d2y_dx2 = t1.gradient(dy_dx, x)  # 2.0
    print(f"listing 2: dy_dx = {float(dy_dx)}, d2y_dx2 = {float(d2y_dx2)}")


def listing_3() -> None:
    """Model-building code whose attributes name the edges of the state graph."""

    class Net(sf.Module):
        def __init__(self):
            super().__init__()
            self.v = sf.Variable(1.0)
            self.out = sf.layers.Dense(1)

        def __call__(self, x):
            return self.out(sf.nn.softplus(x * self.v))

    net = Net()
    x = sf.constant([[1.0, 2.0]])
    eager = net(x)
    staged = sf.function(net)(x)
    names = sorted(v.name for v in net.variables)
    print(f"listing 3: eager {float(eager):.4f}, staged {float(staged):.4f}, "
          f"{len(names)} variables: {names}")


def section_4_1_add_noise() -> None:
    """NumPy randomness is baked into the trace; sf.random is state and stays fresh."""

    @sf.function
    def add_noise():
        eye = sf.eye(5)
        randn = np.random.randn(5, 5).astype(np.float32)
        return eye + randn

    @sf.function
    def add_sf_noise():
        return sf.eye(5) + sf.random.normal((5, 5))

    same = np.array_equal(add_noise().numpy(), add_noise().numpy())
    fresh = not np.array_equal(add_sf_noise().numpy(), add_sf_noise().numpy())
    print(f"add_noise returns the same value every call: {same}")
    print(f"with sf.random.normal it returns fresh values: {fresh}")


def accelerator() -> str:
    """The device listings 4 and 5 use: the first GPU, else the second logical CPU."""
    gpus = [name for name in sf.list_devices() if "GPU" in name]
    return gpus[0] if gpus else "/device:CPU:1"


def listing_4() -> None:
    """Tensor copies between devices: every tensor is a handle to data on one device."""
    a = sf.constant(1.0)  # stored on CPU
    b = a.to(accelerator())  # a.gpu() where there is a GPU
    print(f"listing 4: a is on {a.device}, b on {b.device}")
    if "GPU" not in b.device:
        try:
            a.gpu()
        except ValueError as error:
            print("  a.gpu():", str(error).split(";")[0])


def listing_5() -> None:
    """An op placed on a device gets its inputs on the CPU copied there transparently."""
    before = sf.config.statistics()["device_copies"]
    # stored on CPU
    a = sf.constant(1.0)
    b = sf.constant(2.0)
    with sf.device(accelerator()):
        c = sf.add(a, b)
    assert c.numpy() == 3.0
    copies = sf.config.statistics()["device_copies"] - before
    print(f"listing 5: c = {float(c)} on {c.device}, {copies} inputs copied there")


def listing_6() -> None:
    """Two graph functions, one per value of the Python argument `training`."""

    @sf.function
    def lossy_matmul(W, x, training=True):
        outputs = sf.matmul(W, x)
        if training:
            outputs = sf.nn.dropout(outputs, 0.2)
        return outputs

    W = sf.random.normal((3, 5))
    x = sf.random.normal((5, 1))
    lossy_matmul(W, x, training=True)
    lossy_matmul(W, x, training=False)
    print(f"listing 6: {lossy_matmul.tracing_count} graph functions")


def listing_7() -> None:
    """Variables are captured by reference: the graph function mutates the live object."""
    v = sf.Variable(0.0)

    @sf.function
    def mutate():
        v.assign_add(1.0)
        return v.read_value()

    mutate()
    assert float(v.read_value()) == 1.0
    v.assign_add(1.0)
    assert float(v.read_value()) == 2.0
    mutate()
    assert float(v.read_value()) == 3.0
    print("listing 7: v =", float(v.read_value()))


def listing_8() -> None:
    """Graph functions compose: outer's graph calls inner's graph function."""

    @sf.function
    def inner(a):
        return sf.nn.relu(a)

    @sf.function
    def outer(a, b):
        return inner(sf.matmul(a, b))

    print("listing 8:", outer(sf.eye(3), sf.diag([-1.0, 1.0, 2.0])))
    print(outer.get_concrete_function(sf.eye(3), sf.eye(3)).ir("traced"))


def state_creation() -> None:
    """Variables may be created on the first call only; the function is then retraced."""

    class Scale:
        def __init__(self):
            self.v = None

        @sf.function
        def __call__(self, x):
            if self.v is None:
                self.v = sf.Variable(2.0)
            return x * self.v

    scale = Scale()
    print("state creation:", scale(sf.constant([1.0, 2.0])))

    @sf.function
    def leaky(x):
        return x * sf.Variable(2.0)

    try:
        leaky(sf.constant(1.0))
    except ValueError as error:
        print("ValueError:", str(error).splitlines()[0])


if __name__ == "__main__":
    sf.config.set_logical_device_count("CPU", 2)  # before the devices are first used
    for listing in (section_4_1_select, section_4_1_add_noise, listing_1, listing_2,
                    listing_3, listing_4, listing_5, listing_6, listing_7, listing_8,
                    state_creation):
        print(f"== {listing.__name__} ==")
        listing()
