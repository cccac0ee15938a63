"""Reading PARAMS.yaml (the identified coefficients `identify` writes): what the package writes loads
unchanged, and a damaged or hand-edited file is refused in one sentence naming the file and the key or
coefficient -- by every reader (IdentifiedModel.load, the dynamic model of residual/validate and
the ROS nodes, the torque model). Models identified here from rigid-body torques of a multi-sine
plus known viscous friction and offsets (no simulator)."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import math  # noqa: E402
import re  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from payload_estimation.identification.dynamic_model import load_dynamic_model  # noqa: E402
from payload_estimation.identification.identified_model import IdentificationError, IdentifiedModel  # noqa: E402
from payload_estimation.identification.robot_identification import (  # noqa: E402
    IdentificationOptions,
    identify_gravity,
    identify_robot,
    random_configurations,
)
from payload_estimation.identification.torque_models import load_torque_model  # noqa: E402
from payload_estimation.model.dynamics import RigidBodyDynamics  # noqa: E402
from payload_estimation.model.robot_file import load_robot  # noqa: E402
from payload_estimation.signals.samples import Samples  # noqa: E402

ROBOT = "iiwa14"


@pytest.fixture(scope="module")
def desc():
    return load_robot(ROBOT)


@pytest.fixture(scope="module")
def models(desc) -> dict[str, IdentifiedModel]:
    """A full model with viscous friction and offsets, its essential variant (dropped coefficients) and a
    gravity model with offsets."""
    dyn = RigidBodyDynamics(desc)
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 20.0, 1 / 200)
    w = 2 * np.pi * np.array([0.1, 0.2, 0.3, 0.5])
    a, ph = rng.uniform(0.1, 0.4, (w.size, desc.n)), rng.uniform(0, 2 * np.pi, (w.size, desc.n))
    arg = w[None, :, None] * t[:, None, None] + ph[None]
    q = np.einsum("lj,tlj->tj", a, np.sin(arg))
    dq = np.einsum("lj,tlj->tj", a * w[:, None], np.cos(arg))
    ddq = np.einsum("lj,tlj->tj", -a * w[:, None] ** 2, np.sin(arg))
    tau = np.array([dyn.inverse_dynamics(*s) for s in zip(q, dq, ddq)]) + 1.5 * dq + 0.3
    tau += rng.normal(0.0, 0.05, tau.shape)
    samples = Samples(q, tau, dq, ddq, t)
    poses = random_configurations(desc, 30, seed=1)
    static = Samples(poses, np.array([dyn.gravity(p) for p in poses]) + 0.2)
    return {
        "full": identify_robot(desc, samples, IdentificationOptions(friction="viscous+offset", velocity="recorded")),
        "essential": identify_robot(desc, samples, IdentificationOptions(friction="viscous+offset",
                                                                         velocity="recorded", essential=True)),
        "gravity": identify_gravity(desc, static, offset=True),
    }


@pytest.fixture(scope="module")
def good(models, tmp_path_factory) -> Path:
    return models["full"].save(tmp_path_factory.mktemp("params") / "params.yaml")


@pytest.mark.parametrize("which", ["full", "essential", "gravity"])
def test_a_file_the_package_writes_loads_unchanged(models, which, tmp_path):
    model = models[which]
    path = model.save(tmp_path / "params.yaml")
    back = IdentifiedModel.load(path)
    assert back.to_dict() == model.to_dict()
    assert back.names == model.names and back.kind == model.kind
    np.testing.assert_array_equal(back.K, model.K)
    np.testing.assert_array_equal(back.values, model.values)
    np.testing.assert_array_equal(back.covariance, model.covariance)
    assert back.save(tmp_path / "again.yaml").read_text() == path.read_text()
    if which == "essential":
        assert back.kept.size < len(back.all_names)


def test_optional_keys_may_be_left_out(good, tmp_path):
    """An older or trimmed file (no offset flag, fit, covariance or info) still loads."""
    d = yaml.safe_load(good.read_text())
    d["friction"] = {"viscous": True, "coulomb": False}
    d["coefficients"] = [c for c in d["coefficients"] if not c["name"].startswith("Fo")]
    for key in ("fit", "covariance", "info"):
        del d[key]
    path = tmp_path / "trimmed.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    model = IdentifiedModel.load(path)
    assert not model.offset and model.viscous
    np.testing.assert_allclose(model.covariance, np.diag(model.std ** 2))


def _coefficient(d: dict, name: str) -> dict:
    return next(c for c in d["coefficients"] if c["name"] == name)


def _set(path: tuple, value) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        block = d
        for key in path[:-1]:
            block = _coefficient(d, key) if key[0].isupper() else block[key]
        block[path[-1]] = value
    return edit


def _rename(block: str | None, old: str, new: str) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        target = d if block is None else (_coefficient(d, block) if block[0].isupper() else d[block])
        target[new] = target.pop(old)
    return edit


BAD_FILES = {
    "value nan": (_set(("Jzz7", "value"), math.nan),
                  "coefficient Jzz7: value is nan, not a finite number; correct the file or identify the robot again"),
    "value inf": (_set(("Fv3", "value"), math.inf), "coefficient Fv3: value is inf, not a finite"),
    "value text": (_set(("Jzz7", "value"), "abc"), "coefficient Jzz7: value 'abc' is not a number"),
    "std negative": (_set(("Jzz7", "std"), -1.0), "coefficient Jzz7: std is -1.0; it must be at "
                                                                    "least 0"),
    "factor text": (_set(("Jzz7", "combination", "Jzz7"), "one"),
                    "coefficient Jzz7: the factor of Jzz7 'one' is not a number"),
    "covariance nan": (lambda d: d["covariance"][0].__setitem__(0, math.nan),
                       "covariance entry (Jzz7, Jzz7) is nan, not a finite number"),
    "covariance asymmetric": (lambda d: d["covariance"][0].__setitem__(1, d["covariance"][0][1] + 1.0),
                              "covariance is not symmetric: (Jzz7, "),
    "covariance negative variance": (lambda d: d["covariance"][0].__setitem__(0, -1.0),
                                     "covariance is not positive semi-definite"),
    "friction flag text": (_set(("friction", "viscous"), "no"), "friction.viscous must be true or false, got 'no'"),
    "friction flag number": (_set(("friction", "offset"), 1), "friction.offset must be true or false, got 1"),
    "friction flag off": (_set(("friction", "viscous"), False),
                          "friction offset on 7 joints needs the friction coefficients [Fo1..Fo7] after the base "
                          "coefficients; the file has [Fv1..Fv7, Fo1..Fo7]"),
    "kind typo": (_set(("kind",), "fulll"), "kind 'fulll' is not one of full, gravity"),
    "six joint names": (lambda d: d["joint_names"].pop(),
                        "'joint_names' lists 6 joints, but the coefficients are for 7"),
    "eight joint names": (lambda d: d["joint_names"].append("A8"),
                          "'joint_names' lists 8 joints, but fit.per_joint_rms has 7 values (one per joint)"),
    "required key typo": (_rename(None, "coefficients", "coeficients"),
                          "top level: missing key 'coefficients' ('coeficients' misspelt?); required keys: format, "
                          "robot, kind, joint_names, coefficients, independent"),
    "required key missing": (lambda d: d.pop("robot"), "top level: missing key 'robot'; required keys"),
    "unknown top-level key": (_set(("mass_scale",), 2.0),
                              "top level: unknown key 'mass_scale'; remove or rename it (allowed keys: format, robot, "
                              "kind, joint_names, coefficients, independent, friction, fit, covariance, info)"),
    "friction key typo": (_rename("friction", "viscous", "viscus"),
                          "'friction': unknown key 'viscus' (did you mean 'viscous'?); remove or rename it (allowed "
                          "keys: viscous, coulomb, offset)"),
    "coefficient key typo": (_rename("Jzz7", "value", "vaule"),
                             "coefficient Jzz7: missing key 'value' ('vaule' misspelt?); required keys: name, value"),
    "fit key typo": (_rename("fit", "sigma2", "sigma"), "'fit': unknown key 'sigma' (did you mean 'sigma2'?)"),
    "empty combination": (_set(("Jzz7", "combination"), {}), "coefficient Jzz7 combines no standard parameters"),
    "gravity kind with viscous friction": (_set(("kind",), "gravity"),
                                           "a gravity model has no viscous or Coulomb friction (only offset)"),
    "unknown parameter": (_set(("Jzz7", "combination"), {"Jzzz7": 1.0}),
                          "coefficient Jzz7 combines unknown parameter 'Jzzz7' (standard parameters: m, mcx, mcy, "
                          "mcz, Jxx, Jxy, Jxz, Jyy, Jyz, Jzz followed by the link number 1..7)"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_is_refused_naming_the_file_and_the_key(good, tmp_path, case):
    edit, message = BAD_FILES[case]
    d = yaml.safe_load(good.read_text())
    edit(d)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    with pytest.raises(IdentificationError) as err:
        IdentifiedModel.load(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text, text


def test_every_reader_refuses_a_non_finite_coefficient(good, desc, tmp_path):
    """residual/validate/the nodes (load_dynamic_model), the torque models and estimate (IdentifiedModel.load)
    all refuse the file, not the data."""
    path = tmp_path / "valnan.yaml"
    text, found = re.subn(r"(name: Fv2, value: )[^,]+", r"\1.nan", good.read_text(), count=1)
    assert found == 1
    path.write_text(text)
    want = f"{path}: coefficient Fv2: value is nan, not a finite number"
    for read in (IdentifiedModel.load, lambda p: load_dynamic_model(str(p), desc),
                 lambda p: load_torque_model(str(p), desc)):
        with pytest.raises(IdentificationError, match=re.escape(want)):
            read(path)
