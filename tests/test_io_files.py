"""`sf.io`'s files, base64 and `gfile`, on a temporary folder, with the values TensorFlow
gives."""

import os

import pytest

import stageflow as sf


def test_write_read_and_match_files(tmp_path):
    path = str(tmp_path / "sub" / "a.bin")
    sf.io.write_file(path, sf.constant(b"\x00\xffdata"))
    assert sf.io.read_file(path).numpy() == b"\x00\xffdata"
    assert list(sf.io.matching_files(str(tmp_path / "sub" / "*.bin")).numpy()) == [
        path.encode()]
    with pytest.raises(FileNotFoundError):
        sf.io.read_file(str(tmp_path / "missing"))


def test_file_ops_refuse_to_stage(tmp_path):
    @sf.function
    def staged(x):
        sf.io.read_file(str(tmp_path / "a"))
        return x

    with pytest.raises(TypeError, match="sf.io.read_file"):
        staged(sf.constant(1.0))


def test_base64_as_tensorflow():
    assert sf.io.encode_base64([b"hello?>", b"\xff\xfe"]).numpy().tolist() == [
        b"aGVsbG8_Pg", b"__4"]
    assert sf.io.encode_base64("ab", pad=True).numpy() == b"YWI="
    assert sf.io.decode_base64(["aGVsbG8_Pg", "YWI="]).numpy().tolist() == [b"hello?>", b"ab"]
    with pytest.raises(sf.errors.InvalidArgumentError):
        sf.io.decode_base64("a")


def test_gfile(tmp_path):
    gfile = sf.io.gfile
    folder = gfile.join(str(tmp_path), "x", "y")
    gfile.makedirs(folder)
    assert gfile.isdir(folder) and gfile.exists(folder)
    name = gfile.join(folder, "f.txt")
    with gfile.GFile(name, "w") as file:
        file.write("abc")
    assert gfile.GFile(name).read() == "abc" and gfile.GFile(name).size() == 3
    gfile.copy(name, name + ".2")
    with pytest.raises(FileExistsError):
        gfile.copy(name, name + ".2")
    gfile.rename(name + ".2", name + ".3")
    assert sorted(gfile.listdir(folder)) == ["f.txt", "f.txt.3"]
    assert gfile.glob(gfile.join(folder, "*.3")) == [name + ".3"]
    gfile.remove(name)
    assert not gfile.exists(name)
    gfile.rmtree(str(tmp_path / "x"))
    assert not os.path.exists(str(tmp_path / "x"))
    assert gfile.join("a", "b", "/c") == "/c"
