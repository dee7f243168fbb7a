"""String tensors as TensorFlow has them: `sf.string` values held as NumPy object arrays of
bytes (what TensorFlow's ``.numpy()`` returns), printed, compared, indexed and worked on by
`sf.strings` eagerly; never staged: `sf.function` refuses them, and every other op refuses
them by name."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

WORDS = [["a", "bc"], ["d", "é"]]


def test_constants_hold_utf8_bytes_in_object_arrays():
    scalar = sf.constant("abc")
    assert scalar.dtype == sf.string and scalar.shape == ()
    assert scalar.numpy() == b"abc"  # a scalar's .numpy() is bytes, as in TensorFlow
    t = sf.constant(WORDS)
    assert t.dtype == sf.string and t.shape == (2, 2)
    values = t.numpy()
    assert values.dtype == object and values.tolist() == [[b"a", b"bc"], [b"d", "é".encode()]]
    assert sf.constant([b"x", "y"]).numpy().tolist() == [b"x", b"y"]
    assert sf.constant(np.array(["p", "qq"])).numpy().tolist() == [b"p", b"qq"]
    assert sf.constant("z", shape=[2]).numpy().tolist() == [b"z", b"z"]
    assert sf.constant(["a"], dtype=sf.string).dtype == sf.string
    assert sf.constant(["a"], dtype="string").dtype == sf.string


@pytest.mark.parametrize("value", [[1, "a"], ["a", 1], [["a", b"b"], [2.5, "c"]]])
def test_strings_mixed_with_numbers_are_refused(value):
    with pytest.raises(TypeError, match=r"cannot make a string tensor of .*: it holds \d.*, "
                                        r"not a str or bytes \(sf.strings.as_string formats "
                                        r"numbers\)"):
        sf.constant(value)


def test_ragged_strings_are_refused_as_tensorflow_refuses_them():
    """TensorFlow: "Can't convert non-rectangular Python sequence to Tensor"."""
    for rows in ([["a"], ["b", "c"]], [[0, 1, 2], [3, 4]]):
        with pytest.raises(ValueError, match="non-rectangular Python sequence.*ragged"):
            sf.constant(rows)


def test_strings_never_parse_silently_into_numbers():
    with pytest.raises(TypeError, match="cannot convert strings in \\['1'\\] to float32; "
                                        "sf.strings.to_number parses them"):
        sf.constant(["1"], sf.float32)


def test_printing_as_tensorflow_shows_strings(capsys):
    t = sf.constant(["a", "b"])
    assert repr(t) == "sf.Tensor([b'a', b'b'], shape=(2,), dtype=string)"
    assert str(sf.constant("x")) == "sf.Tensor(b'x', shape=(), dtype=string)"
    sf.print(t, sf.constant("hé"), "end")
    assert capsys.readouterr().out == '["a" "b"] hé end\n'


def test_equality_is_elementwise_and_broadcasts():
    t = sf.constant(WORDS)
    np.testing.assert_array_equal((t == "a").numpy(), [[True, False], [False, False]])
    np.testing.assert_array_equal(sf.equal(t, [["a", "x"]]).numpy(),
                                  [[True, False], [False, False]])
    np.testing.assert_array_equal((t != "bc").numpy(), [[True, False], [True, True]])
    np.testing.assert_array_equal(sf.not_equal("d", t).numpy(), [[True, True], [False, True]])
    with pytest.raises(TypeError, match="equal: cannot compare a string tensor with a int32 "
                                        "one"):
        sf.equal(t, sf.constant(1))


def test_indexing_reshaping_and_joining_move_strings():
    t = sf.constant(WORDS)
    assert t[0].numpy().tolist() == [b"a", b"bc"]
    assert t[1, 0].numpy() == b"d"
    assert t[:, ::-1].numpy().tolist() == [[b"bc", b"a"], ["é".encode(), b"d"]]
    assert sf.reshape(t, [-1]).shape == (4,)
    assert sf.transpose(t)[0].numpy().tolist() == [b"a", b"d"]
    assert sf.concat([t, t], 0).shape == (4, 2)
    assert sf.stack([t[0], t[1]]).numpy().tolist() == t.numpy().tolist()
    assert sf.gather(t, [1, 0])[0].numpy().tolist() == [b"d", "é".encode()]
    assert [s.numpy() for s in t[0]] == [b"a", b"bc"] and len(t) == 2
    assert sf.shape(t).numpy().tolist() == [2, 2]


@pytest.mark.parametrize("op, name", [
    (lambda t: t + t, "add"), (lambda t: sf.reduce_sum(t), "reduce_sum"),
    (lambda t: sf.cast(t, sf.float32), "cast"), (lambda t: sf.abs(t), "abs"),
    (lambda t: t.gpu(), "device_copy"),
])
def test_other_ops_refuse_strings_by_name(op, name):
    t = sf.constant(["a", "b"])
    with pytest.raises(TypeError, match=rf"{name}\(string\[2\].*\): this op cannot take "
                                        r"string tensors \(host-only values\): work "
                                        r"on them with sf.strings.*\n  at .*"
                                        r"test_string_tensors.py:\d+"):
        op(t)


def test_strings_stay_on_the_host_in_a_device_scope():
    gpus = [d for d in sf.list_devices() if "GPU" in d]
    with sf.device(gpus[0] if gpus else "/device:CPU:0"):
        made = sf.constant("q")
        sliced = sf.constant(["a", "b"])[1]
    assert made.device == sliced.device == "/device:CPU:0"
    assert sliced.numpy() == b"b"


def test_sf_function_refuses_string_arguments_naming_them():
    @sf.function
    def identity(x, extra):
        return x

    with pytest.raises(TypeError, match=r"identity: argument \"extra\['s'\]\" is a string "
                                        r"tensor \(string\[1\]\), and sf.function cannot "
                                        r"stage string tensors \(host-only values\): work "
                                        r"on strings outside the function.*\n  at .*"
                                        r"test_string_tensors.py:\d+"):
        identity(sf.constant(1.0), {"s": sf.constant(["a"])})


def test_sf_function_refuses_string_constants_captures_and_string_ops():
    words = sf.constant(["a", "b"])

    @sf.function
    def makes(x):
        return sf.constant("abc")

    @sf.function
    def captures(x):
        return words[0]

    @sf.function
    def formats(x):
        return sf.strings.as_string(x)

    with pytest.raises(TypeError, match="a constant made while tracing is a string tensor"):
        makes(sf.constant(1.0))
    with pytest.raises(TypeError, match="a tensor captured from outside the function is a "
                                        "string tensor"):
        captures(sf.constant(1.0))
    with pytest.raises(TypeError, match=r"sf.strings.as_string works on string tensors, "
                                        r"host-only values that sf.function cannot stage.*"
                                        r"sf.py_func"):
        formats(sf.constant(1.0))


def test_python_strings_are_trace_constants_and_py_func_runs_string_code():
    @sf.function
    def scaled(x, mode):
        return x * 2.0 if mode == "train" else x

    assert float(scaled(sf.constant(1.0), "train")) == 2.0
    assert float(scaled(sf.constant(1.0), "eval")) == 1.0

    @sf.function
    def digits(x):
        return sf.py_func(lambda v: sf.strings.length(sf.strings.as_string(v)), [x],
                          sf.TensorSpec([None], sf.int32))

    assert digits(sf.constant([1.5, 22.0])).numpy().tolist() == [len("1.500000"),
                                                                 len("22.000000")]


def test_a_string_spec_in_an_input_signature_is_refused_at_the_call():
    @sf.function(input_signature=[sf.TensorSpec([2], sf.string)])
    def keeps(words):
        return words

    with pytest.raises(TypeError, match=r"keeps: argument 'words' is a string tensor "
                                        r"\(string\[2\]\), and sf.function cannot stage"):
        keeps(["a", "b"])
    with pytest.raises(TypeError, match=r"an argument is a string tensor"):
        keeps.get_concrete_function()
