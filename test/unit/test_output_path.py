"""The one rule for a writable output path (files.output_path): the command line's options and the nodes' path
parameters, checked against what the file system then allows."""

import os

import pytest

from payload_estimation.files.output_path import output_problem


def test_a_missing_parent_is_created_only_where_allowed_and_the_write_then_succeeds(tmp_path):
    deep = tmp_path / "a" / "b" / "out.yaml"
    assert output_problem(deep, "file", create=True) is None
    deep.parent.mkdir(parents=True)  # what a node does before writing
    deep.write_text("x")
    assert output_problem(tmp_path / "c" / "out.csv", "file", create=False) == \
        f"{tmp_path / 'c' / 'out.csv'}: directory {tmp_path / 'c'} does not exist"
    with pytest.raises(OSError):  # the refusal matches what the write would have met
        (tmp_path / "c" / "out.csv").write_text("x")


def test_what_is_in_the_way_is_named(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    assert output_problem(tmp_path, "file") == f"{tmp_path}: is a directory (give a file name inside it)"
    assert output_problem(a_file, "dir") == f"{a_file}: exists and is not a directory"
    assert output_problem(a_file / "x" / "y", "dir") == f"{a_file / 'x' / 'y'}: {a_file} is a file, not a directory"
    assert output_problem(a_file / "y.csv", "file", create=False) == f"{a_file / 'y.csv'}: {a_file} is a file, not a " \
                                                                      "directory"
    assert output_problem(a_file, "file") is None  # replaced
    assert output_problem(tmp_path / "new", "dir") is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_directory_this_process_may_not_write_into(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert output_problem(locked / "x.csv", "file", create=False) == f"{locked / 'x.csv'}: directory {locked} is " \
                                                                          "not writable"
        assert output_problem(locked / "sub", "dir") == f"{locked / 'sub'}: directory {locked} is not writable"
    finally:
        locked.chmod(0o700)
