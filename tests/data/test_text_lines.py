"""`sf.data.TextLineDataset` and `sf.data.experimental.CsvDataset`: text files' lines as
string elements, in TensorFlow's order (file after file, or interleaved with
`num_parallel_reads`), compressed or not, and their CSV records with TensorFlow's defaults
and column selection."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

import stageflow as sf


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.txt").write_text("a1\na2\na3\n")
    (tmp_path / "b.txt").write_bytes(b"b1\r\nb2")  # CRLF ends, no final newline
    return [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]


def lines(dataset):
    return [line.decode() for line in dataset.as_numpy_iterator()]


def test_lines_of_files_in_order_without_their_ends(files):
    dataset = sf.data.TextLineDataset(files)
    assert dataset.element_spec == sf.TensorSpec((), sf.string)
    assert lines(dataset) == ["a1", "a2", "a3", "b1", "b2"]
    assert lines(dataset) == lines(dataset)  # every epoch reads the files again
    assert lines(sf.data.TextLineDataset(files[0])) == ["a1", "a2", "a3"]
    assert lines(sf.data.TextLineDataset(sf.constant(files))) == lines(dataset)


def test_parallel_reads_interleave_as_tensorflow_does(files):
    """Two files at a time, a line from each in turn; a finished file's place is taken by
    the next (TensorFlow's order for these three files)."""
    dataset = sf.data.TextLineDataset([*files, files[0]], num_parallel_reads=2)
    assert lines(dataset) == ["a1", "b1", "a2", "b2", "a3", "a1", "a2", "a3"]


def test_compressed_files(tmp_path):
    with gzip.open(tmp_path / "c.gz", "wb") as file:
        file.write(b"c1\nc2\n")
    (tmp_path / "d.z").write_bytes(zlib.compress(b"d1\nd2"))
    assert lines(sf.data.TextLineDataset(str(tmp_path / "c.gz"), "GZIP")) == ["c1", "c2"]
    assert lines(sf.data.TextLineDataset(str(tmp_path / "d.z"), "ZLIB")) == ["d1", "d2"]


def test_batches_of_lines_and_bad_arguments(files, tmp_path):
    batches = [b.numpy().tolist() for b in sf.data.TextLineDataset(files[0]).batch(2)]
    assert batches == [[b"a1", b"a2"], [b"a3"]]
    missing = sf.data.TextLineDataset(str(tmp_path / "missing.txt"))  # opened when read
    with pytest.raises(FileNotFoundError, match="no file"):
        list(missing.as_numpy_iterator())
    with pytest.raises(ValueError, match="compression_type"):
        sf.data.TextLineDataset(files, compression_type="BZIP2")


def test_scalar_elements_come_out_as_scalars():
    """As TensorFlow's ``as_numpy_iterator``: NumPy scalars, and bytes for strings."""
    numbers = sf.data.Dataset.from_generator(lambda: iter([1, 2]),
                                             output_signature=sf.TensorSpec((), sf.int64))
    assert list(numbers.as_numpy_iterator()) == [np.int64(1), np.int64(2)]
    assert isinstance(next(iter(numbers.as_numpy_iterator())), np.int64)


def test_csv_records_take_their_defaults_and_selected_columns(tmp_path):
    """TensorFlow's data guide: four int columns with missing fields, all of them or
    columns 1 and 3 (TensorFlow's numbers); quoted fields, a header, a required column."""
    path = tmp_path / "missing.csv"
    path.write_text("1,2,3,4\n,2,3,4\n1,,3,4\n1,2,,4\n1,2,3,\n")
    rows = sf.data.experimental.CsvDataset(str(path), [999] * 4).map(
        lambda *items: sf.stack(items))
    assert rows.element_spec == sf.TensorSpec((4,), sf.int32)
    assert [r.tolist() for r in rows.as_numpy_iterator()] == [
        [1, 2, 3, 4], [999, 2, 3, 4], [1, 999, 3, 4], [1, 2, 999, 4], [1, 2, 3, 999]]
    pairs = sf.data.experimental.CsvDataset(str(path), [999, 999], select_cols=[1, 3])
    assert [(int(a), int(b)) for a, b in pairs.as_numpy_iterator()] == [
        (2, 4), (2, 4), (999, 4), (2, 4), (2, 999)]
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('name,value\n"x,y",2.5\nz,\n')
    records = sf.data.experimental.CsvDataset(str(quoted), [sf.string, 7.5], header=True)
    assert [(s, float(v)) for s, v in records.as_numpy_iterator()] == [(b"x,y", 2.5),
                                                                         (b"z", 7.5)]
    required = sf.data.experimental.CsvDataset(str(path), [sf.int32, 0, 0, 0])
    with pytest.raises(ValueError, match=r"missing.csv:2: a required field"):
        list(required.as_numpy_iterator())
