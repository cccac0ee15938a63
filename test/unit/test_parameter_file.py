"""The parameter file's values: each default written as one line of YAML reads back as the same value of
the same type (a ROS 2 parameter's type is fixed by its default)."""

from __future__ import annotations

import pytest
import yaml

from payload_estimation.ros.parameters import yaml_value

VALUES = ["", "lwr4", "stop_and_resume", "a: b", "x # y", "1.0", "true", "null", "σ of ü", 0.5, 15.0, 1e-6, 3, 0,
          True, False, [1.0], [""], ["A1", "A2"], [6.0, 6.0, 4.0]]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_default_reads_back_as_itself(value):
    text = yaml_value(value)
    assert "\n" not in text
    back = yaml.safe_load(f"key: {text}  # a comment after it")["key"]
    assert back == value and type(back) is type(value)
    if isinstance(value, list):
        assert [type(x) for x in back] == [type(x) for x in value]
