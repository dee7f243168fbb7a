"""sf.Module tracking, the paper's listing 3, and sf.layers (Dense, Conv2D, Sequential)."""

import gc
import weakref

import numpy as np
import pytest

import stageflow as sf


def ids(objects):
    return [id(o) for o in objects]


class Net(sf.Module):
    """The paper's listing 3."""

    def __init__(self):
        super().__init__()
        self.v = sf.Variable(1.0)
        self.out = sf.layers.Dense(1)

    def call(self, x):
        return self.out(sf.nn.softplus(x * self.v))


# --------------------------------------------------------------------------- tracking


def test_tracks_attributes_sorted_by_name_as_tf_module_and_layers_in_assignment_order():
    m = sf.Module()
    m.b = sf.Variable(1.0)
    m.a = sf.Variable(2.0)
    m.not_state = sf.constant(3.0)
    m.number = 4
    assert ids(m.variables) == ids([m.a, m.b])  # tf.Module's order: ['a:0', 'b:0']
    assert m.submodules == []
    assert m.name == "module"

    class Pair(sf.layers.Layer):  # Keras' order: as created, ['z', 'y']
        def build(self, input_shape):
            self.z = self.add_weight("z", (), "zeros")
            self.y = self.add_weight("y", (), "ones")

    pair = Pair()
    pair(sf.ones((1, 1)))
    assert ids(pair.variables) == ids([pair.z, pair.y])


def test_tracks_lists_tuples_dicts_and_nesting():
    m = sf.Module()
    inner = sf.Module()
    inner.w = sf.Variable(0.0)
    m.items = [sf.Variable(1.0), (sf.Variable(2.0), {"k": sf.Variable(3.0)})]
    m.table = {"first": inner, "second": [sf.Variable(4.0)]}
    expected = [m.items[0], m.items[1][0], m.items[1][1]["k"], inner.w, m.table["second"][0]]
    assert ids(m.variables) == ids(expected)
    assert ids(m.submodules) == ids([inner])
    paths = [path for path, _ in m._flatten(lambda o: isinstance(o, sf.Variable))]
    assert paths == [("items", 0), ("items", 1, 0), ("items", 1, 1, "k"),
                     ("table", "first", "w"), ("table", "second", 0)]


def test_submodules_are_all_descendants_each_once():
    leaf = sf.Module(name="leaf")
    leaf.v = sf.Variable(1.0)
    middle = sf.Module(name="middle")
    middle.leaf = leaf
    top = sf.Module(name="top")
    top.middle = middle
    top.again = [leaf, leaf]  # shared: reported once
    assert [m.name for m in top.submodules] == ["leaf", "middle"]  # "again" sorts first
    assert ids(top.variables) == ids([leaf.v])


def test_cycles_and_shared_variables_end():
    a, b = sf.Module(), sf.Module()
    a.other, b.other = b, a
    shared = sf.Variable(1.0)
    a.v = b.v = shared
    loop = []
    loop.append(loop)
    a.loop = loop
    assert ids(a.variables) == ids([shared])
    assert ids(a.submodules) == ids([b])


def test_subclass_without_super_init_and_names():
    class NoInit(sf.Module):
        def __init__(self):
            self.v = sf.Variable(1.0)

    class MyFancyNet(sf.Module):
        pass

    assert NoInit().name == "no_init"
    assert len(NoInit().variables) == 1
    assert MyFancyNet().name == "my_fancy_net"
    assert MyFancyNet(name="custom").name == "custom"
    with pytest.raises(TypeError, match="not callable"):
        MyFancyNet()(1.0)


def test_trainable_flags():
    m = sf.Module()
    m.w = sf.Variable(1.0)
    m.frozen = sf.Variable(2.0, trainable=False)
    assert ids(m.trainable_variables) == ids([m.w])
    assert ids(m.non_trainable_variables) == ids([m.frozen])

    dense = sf.layers.Dense(2, trainable=False)
    dense(sf.ones((1, 3)))
    assert dense.trainable_variables == [] and len(dense.variables) == 2
    model = sf.layers.Sequential([sf.layers.Dense(2), sf.layers.Dense(1)])
    model(sf.ones((1, 3)))
    assert len(model.trainable_variables) == 4
    model.layers[0].trainable = False
    assert ids(model.trainable_variables) == ids(model.layers[1].variables)
    with sf.GradientTape() as tape:  # a frozen layer's variables are not watched
        y = sf.reduce_sum(model(sf.ones((1, 3))))
    assert ids(tape.watched_variables()) == ids(model.layers[1].variables)
    assert tape.gradient(y, model.layers[0].kernel) is None


# --------------------------------------------------------------------------- listing 3


def listing_3_values(staged):
    sf.random.set_seed(3)
    net = Net()
    call = sf.function(net.call) if staged else net
    x = sf.constant([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]])
    first, second = call(x), call(x)
    with sf.GradientTape() as tape:
        loss = sf.reduce_sum(call(x))
    grads = tape.gradient(loss, net.trainable_variables)
    return net, call, first, second, grads


def test_listing_3_eager_and_staged_agree():
    net, _, eager, again, eager_grads = listing_3_values(staged=False)
    assert [v.name for v in net.variables[:2]] == [f"{net.out.name}/kernel",
                                                   f"{net.out.name}/bias"]
    assert ids(net.variables) == ids([net.out.kernel, net.out.bias, net.v])  # by name
    assert ids(net.submodules) == ids([net.out])
    net2, call, staged, staged_again, staged_grads = listing_3_values(staged=True)
    assert call.tracing_count == 2  # created the variables, then traced once more
    np.testing.assert_allclose(staged.numpy(), eager.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(staged_again.numpy(), staged.numpy())
    np.testing.assert_array_equal(again.numpy(), eager.numpy())
    for a, b in zip(eager_grads, staged_grads, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5)
    # Against NumPy: out(softplus(x * v)).
    x = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], np.float32)
    hidden = np.log1p(np.exp(x * net2.v.numpy()))
    np.testing.assert_allclose(staged.numpy(), hidden @ net2.out.kernel.numpy()
                               + net2.out.bias.numpy(), rtol=1e-5)


def test_function_decorated_call_method():
    class Model(sf.Module):
        def __init__(self):
            super().__init__()
            self.dense = sf.layers.Dense(3, activation="tanh")

        @sf.function
        def __call__(self, x):
            return self.dense(x)

    model = Model()
    x = sf.ones((2, 4))
    y = model(x)
    kernel = model.dense.kernel
    for _ in range(3):
        np.testing.assert_array_equal(model(x).numpy(), y.numpy())
    assert Model.__call__.__get__(model).tracing_count == 2
    assert model.dense.kernel is kernel and len(model.variables) == 2
    np.testing.assert_allclose(y.numpy(), np.tanh(np.ones((2, 4)) @ kernel.numpy()), rtol=1e-6)


def test_sf_function_over_a_model_creates_variables_once():
    model = sf.layers.Sequential([sf.layers.Dense(8, "relu"), sf.layers.Dense(2)])
    staged = sf.function(model)
    x = sf.random.normal((5, 3))
    y = staged(x)
    assert staged.tracing_count == 2
    variables = model.variables
    assert len(variables) == 4 and all(type(v._value) is np.ndarray for v in variables)
    for _ in range(3):
        np.testing.assert_array_equal(staged(x).numpy(), y.numpy())
    assert staged.tracing_count == 2 and ids(model.variables) == ids(variables)
    # The graph kept is the second trace: it reads the live variables by reference.
    concrete = staged.get_concrete_function(x)
    assert set(ids(concrete.variables)) == set(ids(variables))
    model.layers[1].bias.assign([10.0, 20.0])
    np.testing.assert_allclose(staged(x).numpy(), y.numpy() + [10.0, 20.0], rtol=1e-6)
    np.testing.assert_allclose(model(x).numpy(), staged(x).numpy(), rtol=1e-6)


# --------------------------------------------------------------------------- layers


def test_dense_shapes_values_and_initializers():
    sf.random.set_seed(0)
    dense = sf.layers.Dense(4, activation="relu")
    assert dense.variables == []  # nothing before the first call
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    y = dense(x)
    assert dense.kernel.shape == (5, 4) and dense.bias.shape == (4,)
    assert dense.kernel.dtype == sf.float32
    limit = np.sqrt(6.0 / (5 + 4))
    assert np.all(np.abs(dense.kernel.numpy()) <= limit)
    assert np.std(dense.kernel.numpy()) > 0
    np.testing.assert_array_equal(dense.bias.numpy(), np.zeros(4))
    dense.bias.assign([0.1, -0.2, 0.3, -0.4])
    expected = np.maximum(x @ dense.kernel.numpy() + dense.bias.numpy(), 0)
    np.testing.assert_allclose(dense(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert y.shape == (3, 4)
    # Higher-rank inputs act on the last dim.
    x3 = np.ones((2, 3, 5), np.float32)
    np.testing.assert_allclose(dense(x3).numpy(), np.maximum(
        x3 @ dense.kernel.numpy() + dense.bias.numpy(), 0), rtol=1e-5)


@pytest.mark.parametrize("activation, reference", [
    (None, lambda z: z),
    ("tanh", np.tanh),
    ("sigmoid", lambda z: 1 / (1 + np.exp(-z))),
    ("softmax", lambda z: np.exp(z) / np.exp(z).sum(-1, keepdims=True)),
    ("gelu", lambda z: 0.5 * z * (1 + np.vectorize(__import__("math").erf)(z / np.sqrt(2)))),
    (lambda t: t * 2.0, lambda z: z * 2.0),
])
def test_dense_activations(activation, reference):
    dense = sf.layers.Dense(3, activation=activation, use_bias=False,
                            kernel_initializer=lambda shape, dtype: sf.ones(shape, dtype) * 0.5)
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    assert dense(x).shape == (2, 3) and dense.bias is None and len(dense.variables) == 1
    np.testing.assert_allclose(dense(x).numpy(), reference(x @ np.full((2, 3), 0.5)),
                               rtol=1e-5, atol=1e-6)


def test_layer_errors():
    with pytest.raises(ValueError, match="unknown activation 'nope'"):
        sf.layers.Dense(2, activation="nope")
    with pytest.raises(ValueError, match="unknown initializer"):
        sf.layers.Dense(2, kernel_initializer="nope")
    with pytest.raises(ValueError, match="rank >= 4"):
        sf.layers.Conv2D(2, 3)(sf.ones((3, 3, 1)))


def test_dense_takes_the_inputs_floating_dtype():
    dense = sf.layers.Dense(2)
    assert dense(np.ones((1, 3))).dtype == sf.float64
    assert dense.kernel.dtype == sf.float64
    fixed = sf.layers.Dense(2, dtype=sf.float64)
    assert fixed(sf.ones((1, 3), sf.float64)).dtype == sf.float64
    assert sf.layers.Dense(2)(sf.ones((1, 3))).dtype == sf.float32


def reference_conv2d(x, w, stride, padding):
    kh, kw = w.shape[:2]
    if padding == "same":
        pads = []
        for size, k in ((x.shape[1], kh), (x.shape[2], kw)):
            out = -(-size // stride)
            total = max((out - 1) * stride + k - size, 0)
            pads.append((total // 2, total - total // 2))
        x = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    ho = (x.shape[1] - kh) // stride + 1
    wo = (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], ho, wo, w.shape[3]))
    for i in range(ho):
        for j in range(wo):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


@pytest.mark.parametrize("stride, padding", [(1, "valid"), (2, "same"), (1, "same")])
def test_conv2d_against_numpy(stride, padding):
    sf.random.set_seed(1)
    conv = sf.layers.Conv2D(4, (3, 2), strides=stride, padding=padding, activation="relu")
    x = np.random.default_rng(1).standard_normal((2, 7, 6, 3)).astype(np.float32)
    y = conv(x)
    assert conv.kernel.shape == (3, 2, 3, 4) and conv.bias.shape == (4,)
    limit = np.sqrt(6.0 / (3 * 2 * 3 + 3 * 2 * 4))
    assert np.all(np.abs(conv.kernel.numpy()) <= limit)
    conv.bias.assign([0.5, -0.5, 0.0, 1.0])
    expected = np.maximum(reference_conv2d(x, conv.kernel.numpy(), stride, padding)
                          + conv.bias.numpy(), 0)
    assert y.shape == expected.shape
    np.testing.assert_allclose(conv(x).numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sf.function(conv)(x).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_sequential_chains_layers_and_callables():
    sf.random.set_seed(2)
    model = sf.layers.Sequential([
        sf.layers.Conv2D(2, 3, padding="same", activation="relu"),
        sf.layers.Flatten(),
        sf.layers.Dense(5),
        sf.nn.softmax,
    ])
    x = np.random.default_rng(2).standard_normal((4, 5, 5, 1)).astype(np.float32)
    y = model(x)
    assert y.shape == (4, 5)
    np.testing.assert_allclose(y.numpy().sum(-1), np.ones(4), rtol=1e-5)
    conv, _, dense, _ = model.layers
    assert ids(model.variables) == ids([conv.kernel, conv.bias, dense.kernel, dense.bias])
    assert ids(model.submodules) == ids([conv, model.layers[1], dense])
    hidden = np.maximum(reference_conv2d(x, conv.kernel.numpy(), 1, "same"), 0)
    logits = hidden.reshape(4, -1) @ dense.kernel.numpy()
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), softmax, rtol=1e-4, atol=1e-6)
    model.add(sf.layers.Dense(1))
    assert model(x).shape == (4, 1) and len(model.variables) == 6
    with pytest.raises(TypeError, match="callable"):
        model.add(3)


def test_gradients_reach_every_layer_variable():
    model = sf.layers.Sequential([sf.layers.Dense(4, "gelu"), sf.layers.Dense(1)])
    x = sf.random.normal((6, 3))

    @sf.function
    def grads(x):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(model(x)))
        return tape.gradient(loss, model.trainable_variables)

    staged = grads(x)
    with sf.GradientTape() as tape:
        loss = sf.reduce_mean(sf.square(model(x)))
    eager = tape.gradient(loss, model.trainable_variables)
    assert len(staged) == 4 and grads.tracing_count == 2
    for a, b in zip(eager, staged, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------- kept walks


def test_variables_walk_is_kept_and_sees_every_change():
    """`variables` keeps its walk while the structure stands; a new sub-layer or variable
    anywhere below, a list or dict changed in place, a deleted attribute, a trainable flag
    all show at the next call, as a fresh walk would."""
    def fresh(module):
        return ids(v for _, v in module._flatten(lambda o: isinstance(o, sf.Variable)))

    top, child = sf.Module(), sf.Module()
    top.child = child
    top.blocks = [sf.layers.Dense(1)]
    top.blocks[0](sf.ones((1, 2)))
    top.table = {"a": sf.Variable(1.0)}
    child.pair = (sf.Variable(2.0), [])
    first = top.variables
    assert ids(first) == fresh(top) and len(first) == 4
    first.append(sf.Variable(0.0))  # the caller's copy: not the kept list
    assert ids(top.variables) == fresh(top) and len(top.variables) == 4

    changes = [
        lambda: setattr(child, "w", sf.Variable(3.0)),  # a grandchild's new variable
        lambda: (setattr(child, "inner", sf.layers.Dense(1)),  # a new sub-layer ...
                 child.inner(sf.ones((1, 2)))),  # ... that builds its variables
        lambda: (top.blocks.append(sf.layers.Dense(1)),  # in place, then built
                 top.blocks[-1](sf.ones((1, 2)))),
        lambda: top.blocks.__setitem__(0, sf.Variable(4.0)),  # an item replaced
        lambda: top.table.update(b=sf.Variable(5.0)),  # a dict key added
        lambda: top.table.update(a=sf.Variable(6.0)),  # a dict value replaced
        lambda: child.pair[1].append(sf.Variable(7.0)),  # a list inside a tuple
        lambda: delattr(child, "w"),
        lambda: top.table.pop("a"),
        lambda: setattr(top, "blocks", []),
    ]
    for change in changes:
        before = ids(top.variables)
        change()
        assert ids(top.variables) == fresh(top) != before

    frozen = top.variables[0]
    frozen.trainable = False
    assert ids(top.trainable_variables) == [i for i in fresh(top) if i != id(frozen)]
    assert ids(top.non_trainable_variables) == [id(frozen)]
    layer = child.inner
    layer.trainable = False
    assert not any(id(v) in ids(layer.variables) for v in top.trainable_variables)


def test_a_kept_walk_does_not_keep_its_module_alive():
    parent, child = sf.Module(), sf.Module()
    parent.children = [child]
    child.owners = [parent]  # a cycle through lists the kept walk holds
    parent.v = sf.Variable(1.0)
    assert len(parent.variables) == 1
    gone = weakref.ref(parent)
    del parent, child
    gc.collect()
    assert gone() is None


def test_the_training_mode_of_a_layer_call_reaches_the_calls_inside_and_ends_with_it():
    from stageflow.models.layers import base as layers

    seen = []

    class Probe(sf.layers.Layer):
        def call(self, x, training=False):
            seen.append(training)
            return x

    class Failing(sf.layers.Layer):
        def call(self, x):
            raise RuntimeError("inner failure")

    class Outer(sf.layers.Layer):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def call(self, x):  # passes no training: the inner call inherits this call's
            return self.inner(x)

    x = sf.constant([1.0])
    Outer(Probe())(x, training=True)
    Outer(Probe())(x)
    assert seen == [True, False]
    with pytest.raises(RuntimeError, match="inner failure"):
        Outer(Failing())(x, training=True)
    assert layers._training_modes() == []  # popped on the way out of the failed calls
    Probe()(x)
    assert seen[-1] is False
