"""The payload estimator's rules without ROS (:class:`payload.estimator.PayloadEstimator`), on the MuJoCo arm.

The core is driven as the node drives it — samples from the simulated arm's torque sensor (effort in
"units" of a torque gain), then one call per service — and judged against the payload MuJoCo
simulates and the arm's measured torques: static captures and the differential fit, the recording
and its overflow, a reference run and the differential motion fit, the calibration, every refusal.
The node's parameter table is the configuration (:func:`ros.estimator_params.estimator_config`).
"""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.errors import PayloadEstimationError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.estimator import CALIBRATION, LOADED, UNLOADED, PayloadEstimator
from payload_estimation.ros.estimator_params import PARAMS, estimator_config
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

DEG = np.pi / 180
PICK = np.array([5, 35, -5, -70, 10, 55, 5]) * DEG
BODY = BodyInertia(2.5, np.array([0.01, -0.015, 0.09]), np.diag([0.012, 0.01, 0.007]))
DEFAULTS = {p.name: p.default for p in PARAMS.params}
GAIN = 2.0  # N m per unit of effort: the arm's torque is fed as effort = tau / GAIN


def config(**changes):
    return estimator_config({**DEFAULTS, **changes})


@pytest.fixture(scope="module")
def desc():
    return load_robot("lwr4")


def make_arm(desc, seed=1, offsets=0.0, model_error=0.03):
    return SimulatedArm(desc, SimConfig(seed=seed, model_error=model_error,
                                        sensor=SensorConfig(noise_std=0.05, offset=offsets)))


def make_core(desc, **changes) -> PayloadEstimator:
    core = PayloadEstimator(config(torque_gain=[GAIN], **changes))
    core.set_robot(RigidBodyDynamics(desc), desc.joint_names)
    return core


def feed(core, arm, seconds, velocity=True):
    """``seconds`` of the arm's samples into the core, as joint_states would bring them."""
    for s in arm.run(seconds):
        core.add_sample(s.t, s.q, s.dq if velocity else None, s.tau / GAIN)


def rest_at(core, arm, q, seconds=0.25):
    arm.reset(q)
    feed(core, arm, seconds)


def poses(center, amplitude_deg, k, seed, desc):
    rng = np.random.default_rng(seed)
    lim = desc.limits.position
    out = [center] + [center + rng.uniform(-1, 1, center.size) * amplitude_deg * DEG for _ in range(k - 1)]
    return [np.clip(q, lim[:, 0] + DEG, lim[:, 1] - DEG) for q in out]


def excite(arm, duration=1.6):
    """Rest-to-rest excitation around the current pose: up to 7 deg per joint, three harmonics."""
    q0 = arm.state().q
    amp = np.array([7, 6, 7, 6, 7, 7, 7]) * DEG
    freq = np.array([1, 2, 3, 2, 1, 3, 2]) / duration
    t = np.arange(0.05, duration + 1e-9, 0.05)
    env, denv = np.sin(np.pi * t / duration) ** 2, np.pi / duration * np.sin(2 * np.pi * t / duration)
    s, c = np.sin(2 * np.pi * np.outer(t, freq)), np.cos(2 * np.pi * np.outer(t, freq))
    q = q0 + amp * env[:, None] * s
    dq = amp * (denv[:, None] * s + env[:, None] * 2 * np.pi * freq * c)
    arm.set_trajectory([(ti, qi, vi) for ti, qi, vi in zip(t, q, dq)])


def test_every_parameter_default_maps_to_the_core_config_and_a_changed_value_arrives():
    """estimator_config: each table parameter the core reads lands in its field; the others are the node's."""
    fields = {"method": lambda c: c.fit.method, "torque_noise": lambda c: c.fit.torque_noise,
              "model_uncertainty": lambda c: c.fit.model_uncertainty,
              "torque_offset_std": lambda c: c.fit.torque_offset_std, "max_mass_std": lambda c: c.fit.max_mass_std,
              "max_com_std": lambda c: c.fit.max_com_std, "max_payload": lambda c: c.fit.limits.max_payload,
              "max_com_radius": lambda c: c.fit.limits.max_com_radius, "anchor_samples": lambda c: c.anchor_samples,
              "anchor_window": lambda c: c.anchor_window, "torque_gain": lambda c: list(c.torque_gain),
              "max_recording": lambda c: c.max_recording, "gravity_model": lambda c: c.gravity_model,
              "calibration_file": lambda c: c.calibration_file, "window": lambda c: c.settle.window,
              "max_velocity": lambda c: c.settle.max_velocity,
              "max_position_spread": lambda c: c.settle.max_position_spread,
              "max_torque_std": lambda c: c.settle.max_torque_std,
              "max_torque_drift": lambda c: c.settle.max_torque_drift,
              "torque_drift_relative": lambda c: c.settle.torque_drift_relative,
              "min_average_samples": lambda c: c.settle.min_average_samples,
              "max_window": lambda c: c.settle.max_window,
              "grasp_com_prior": lambda c: list(c.grasp_com_prior) or [0.0],
              "grasp_com_prior_std": lambda c: c.grasp_com_prior_std,
              "grasp_inertia_prior": lambda c: list(c.grasp_inertia_prior) or [0.0],
              "grasp_inertia_prior_std": lambda c: c.grasp_inertia_prior_std}
    node_only = {"robot", "base_link", "tip_link", "joint_names", "joint_state_timeout", "max_stamp_jump",
                 "restart_samples", "export_dir", "online_estimation"}
    assert set(fields) | node_only == set(DEFAULTS) and not set(fields) & node_only
    defaults = config()
    for name, get in fields.items():
        assert get(defaults) == DEFAULTS[name], name
    for name, get in fields.items():
        p = PARAMS.by_name[name]
        if p.choices:
            new = next(c for c in p.choices if c != p.default)
        elif isinstance(p.default, list):
            new = [2.5]
        elif isinstance(p.default, str):
            new = "/tmp/elsewhere.yaml"
        elif isinstance(p.default, int):
            new = p.default + 1
        else:
            new = (p.default + p.high) / 2 if name != "window" else 0.2  # the window stays within max_window
        changed = config(**{name: new})
        assert get(changed) == new and changed != defaults, name
    assert defaults.anchor_settle.min_average_samples == DEFAULTS["anchor_samples"]
    assert defaults.anchor_settle.max_window == DEFAULTS["anchor_window"]


def test_static_captures_and_the_differential_fit_find_the_simulated_payload(desc):
    """Unloaded anchor at the pick configuration, loaded captures around it (effort scaled by the torque
    gain), the differential fit: MuJoCo's payload within 1 % and 3 mm; then the captures' bookkeeping."""
    arm = make_arm(desc, offsets=np.random.default_rng(2).uniform(-0.5, 0.5, desc.n))
    core = make_core(desc)
    np.testing.assert_array_equal(core.gain, np.full(desc.n, GAIN))
    arm.reset(PICK)
    feed(core, arm, 1.2)
    anchor = core.capture(UNLOADED, 0.0)
    # the anchor averages at least anchor_samples (150 at 1 kHz: longer than the 0.12 s window of a capture)
    assert anchor.ok and anchor.message.startswith("unloaded capture 1 at q = "), anchor.message
    assert int(anchor.message.split(" samples")[0].split()[-1]) >= DEFAULTS["anchor_samples"], anchor.message
    arm.attach_payload(BODY)
    for k, q in enumerate(poses(PICK, 7.0, 8, 3, desc)):
        rest_at(core, arm, q)
        a = core.capture(LOADED, 0.004)
        assert a.ok and a.message.startswith(f"capture {k + 1} at q = ") and "newest 4 ms old" in a.message, a.message
        assert int(a.message.split(" samples")[0].split()[-1]) < DEFAULTS["anchor_samples"], a.message
    out = core.estimate()
    est = out.estimate
    assert out.ok and not out.fit_failed and core.current is est, out.message
    print(out.message)
    assert abs(est.mass - BODY.mass) <= 0.01 * BODY.mass
    assert np.linalg.norm(est.com - BODY.com) <= 0.003
    assert est.frame == desc.payload_frame_name and "anchored" in est.method, est.method
    assert out.imprecise == "" and out.message.startswith(f"mass {est.mass:.4f} kg")
    # accepted: the loaded captures are done with, the anchor (taken before the grasp) stays
    assert (core.captures(LOADED), core.captures(UNLOADED)) == (0, 1)
    assert "estimate rejected: no samples captured" in core.estimate().message
    rest_at(core, arm, PICK)
    assert core.capture(LOADED, 0.0).ok and core.capture(CALIBRATION, 0.0).ok
    assert core.clear().message == "cleared 1 loaded and 1 calibration capture(s); payload and unloaded anchor kept"
    assert core.captures(UNLOADED) == 1
    assert core.capture(LOADED, 0.0).ok
    assert core.grasped() == (f"; the published estimate ({est.mass:.3f} kg) described the load before this grasp: "
                              "announce ~/released when an object is put down")
    assert (core.captures(LOADED), core.captures(UNLOADED)) == (0, 1)
    core.reset()
    assert core.current.mass == 0 and core.captures(UNLOADED) == 0 and core.grasped() == ""


def test_captures_are_refused_while_the_arm_moves_and_after_a_stream_restart(desc):
    arm = make_arm(desc)
    core = make_core(desc)
    a = core.capture(LOADED, 0.0)
    assert not a.ok and a.message.startswith("capture rejected: arm not static: "), a.message
    rest_at(core, arm, PICK, 0.3)
    arm.set_trajectory([(1.0, PICK + 5 * DEG, None)])
    feed(core, arm, 0.4)
    moving = core.capture(CALIBRATION, 0.0)
    assert not moving.ok and moving.message.startswith("calibration capture rejected: arm not static: ")
    rest_at(core, arm, PICK, 0.3)
    assert core.capture(LOADED, 0.0).ok
    core.restart()  # stamps started over: what came before does not count
    assert not core.capture(LOADED, 0.0).ok
    feed(core, arm, 0.2)
    assert core.capture(LOADED, 0.0).message.startswith("capture 2 at")


def test_a_rejected_fit_keeps_the_previous_payload_and_the_captures(desc):
    """method differential without an unloaded anchor: the fit is refused with the reason, the payload in
    use and the loaded captures stay (a ~/capture_unloaded and ~/estimate can follow)."""
    arm = make_arm(desc)
    core = make_core(desc, method="differential")
    arm.attach_payload(BODY)
    for q in poses(PICK, 7.0, 4, 5, desc):
        rest_at(core, arm, q)
        assert core.capture(LOADED, 0.0).ok
    out = core.estimate()
    assert not out.ok and out.fit_failed and core.current.mass == 0
    assert "needs an unloaded capture" in out.message and out.message.endswith("previous payload kept (0.000 kg)")
    assert core.captures(LOADED) == 4


def test_the_recording_overflows_after_max_recording_and_is_refused(desc):
    """A recording takes every sample with a velocity until max_recording s after its first; longer, it is
    cut and refused when taken; taking it stops it; without velocities nothing is recorded."""
    arm = make_arm(desc)
    core = make_core(desc, max_recording=1.0)
    arm.reset(PICK)
    assert core.store_reference().message == "reference rejected: nothing recorded (call ~/start_recording first)"
    assert core.start_recording().ok and core.recording
    feed(core, arm, 1.0)  # samples t0 .. t0 + 0.999 s: within max_recording
    a = core.store_reference()
    assert not a.ok and a.fault and "did not move during the 1.00 s recording" in a.message, a.message
    assert not core.recording and core.reference is None
    core.start_recording()
    feed(core, arm, 1.5)
    out = core.estimate_motion()
    assert out.message == "estimate rejected: the recording exceeded max_recording (1.0 s)" and not out.fit_failed
    core.start_recording()
    feed(core, arm, 0.5, velocity=False)
    a = core.store_reference()
    assert not a.ok and "nothing was recorded" in a.message


def test_a_reference_run_then_the_loaded_run_give_the_payload_by_the_differential_motion_fit(desc):
    """~/start_recording, one excitation, ~/store_reference on the unloaded arm; the same after the grasp and
    ~/estimate_motion: MuJoCo's mass within 1 % and CoM within 5 mm, differential against the reference."""
    arm = make_arm(desc, offsets=np.random.default_rng(4).uniform(-0.5, 0.5, desc.n))
    core = make_core(desc)

    def run() -> None:
        rest_at(core, arm, PICK, 0.3)
        core.start_recording()
        feed(core, arm, 0.2)
        excite(arm)
        feed(core, arm, 1.9)

    run()
    stored = core.store_reference()
    assert stored.ok and stored.message.startswith("reference run stored: 2100 samples over 2.10 s"), stored.message
    assert core.status_values()["reference_run"] == "2100 samples, 2.10 s"
    arm.attach_payload(BODY)
    run()
    out = core.estimate_motion()
    est = out.estimate
    assert out.ok, out.message
    print(out.message)
    assert est.method.startswith("dynamic differential") and "2100 samples" in est.notes[-1]
    assert abs(est.mass - BODY.mass) <= 0.01 * BODY.mass
    assert np.linalg.norm(est.com - BODY.com) <= 0.005
    assert core.current is est and not core.recording


def test_calibration_identifies_the_simulated_arm_and_a_file_of_another_kind_is_refused(desc, tmp_path):
    """~/capture_calibration over a sweep of the unloaded arm, ~/calibrate: the written model predicts the
    arm's measured torque at new poses (offsets included) far better than the nominal description."""
    offsets = np.random.default_rng(6).uniform(-0.5, 0.5, desc.n)
    arm = make_arm(desc, offsets=offsets, model_error=0.05)
    core = make_core(desc)
    assert core.calibrate(tmp_path / "g.yaml").message.startswith("calibrate rejected: no calibration captures")
    for q in poses(PICK, 25.0, 30, 7, desc):
        rest_at(core, arm, q, 0.15)
        assert core.capture(CALIBRATION, 0.0).ok
    path = tmp_path / "cal" / "gravity.yaml"
    a = core.calibrate(path)
    assert a.ok and path.is_file() and "gravity model identified from 30 poses" in a.message, a.message
    assert core.captures(CALIBRATION) == 30  # kept until the file is in use
    core.configure(config(torque_gain=[GAIN], gravity_model=str(path)))
    choice = core.load_model()
    core.calibrated()
    assert not choice.refused and choice.text.startswith("unloaded model: ") and core.captures(CALIBRATION) == 0
    assert core.gravity_model is not None and "gravity.yaml" in core.model_label("lwr4")
    dyn = RigidBodyDynamics(desc)
    model_err, nominal_err = [], []
    for q in poses(PICK, 20.0, 6, 8, desc)[1:]:
        measured = arm.static_capture(q, samples=100000)
        model_err.append(np.max(np.abs(core.gravity_model.gravity(q) - measured)))
        nominal_err.append(np.max(np.abs(dyn.gravity(q) - measured)))
    print(f"calibrated {max(model_err):.3f} N m, nominal {max(nominal_err):.3f} N m")
    assert max(model_err) <= 0.1 and max(model_err) <= 0.2 * min(nominal_err)
    # a file that is not an identified model: as gravity_model estimates are refused, as the calibration
    # file the nominal model is used (and said)
    bad = tmp_path / "bad.yaml"
    bad.write_text("not: a model\n")
    assert core.check(config(torque_gain=[GAIN], gravity_model=str(bad))).startswith(f"gravity_model {bad} refused")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    assert "is not a text file" in core.check(config(torque_gain=[GAIN], gravity_model=str(binary)))
    core.configure(config(torque_gain=[GAIN], gravity_model=str(bad)))
    assert core.load_model().refused and core.gravity_model is None
    rest_at(core, arm, PICK)
    assert core.capture(LOADED, 0.0).ok
    assert core.estimate().message.startswith(f"estimate rejected: gravity_model {bad} did not load")
    core.configure(config(torque_gain=[GAIN], calibration_file=str(bad)))
    choice = core.load_model()
    assert choice.refused and core.calibration_refused and core.calibration_note.startswith(f"REFUSED {bad}")
    assert core.gravity_model is None and core.gravity_error == ""
    out = core.estimate()  # fitted (on the nominal model): one pose is too few, said as such
    assert out.fit_failed and "rank deficient" in out.message, out.message


def test_torque_gains_that_do_not_fit_the_robot_are_refused(desc):
    core = PayloadEstimator(config(torque_gain=[1.0, 2.0]))
    with pytest.raises(PayloadEstimationError, match="2 values, the robot has 7 joints"):
        core.set_robot(RigidBodyDynamics(desc), desc.joint_names)
    assert core.dyn is None
    core = make_core(desc)
    assert core.check(config(torque_gain=[1.0, 2.0, 3.0])).startswith("torque_gain: torque gain has 3 values")
    assert core.check(config(torque_gain=[1.5])) is None


def test_a_calibration_found_at_start_says_where_it_came_from_and_how_to_forget_it(desc, tmp_path, monkeypatch):
    """Issue 47: `sweep` leaves a calibration file that the next start loads; the log line and the status value
    name the file, when ~/calibrate (payload_sampler/sweep) wrote it, and how to stop using it."""
    import os
    import time

    from payload_estimation.identification.robot_identification import identify_gravity
    from payload_estimation.model.robot_file import FINGERPRINT_KEY, kinematics_fingerprint
    from payload_estimation.signals.samples import Samples

    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    dyn = RigidBodyDynamics(desc)
    q = poses(PICK, 25.0, 30, 7, desc)
    model = identify_gravity(desc, Samples(q, np.array([dyn.gravity(x) for x in q])), offset=True)
    model.info[FINGERPRINT_KEY] = kinematics_fingerprint(desc)
    path = tmp_path / "payload_estimation" / f"gravity_{desc.name}.yaml"
    path.parent.mkdir()
    model.save(path)
    os.utime(path, (1.7e9, 1.7e9))
    core = PayloadEstimator(config(torque_gain=[GAIN]))
    choice = core.set_robot(dyn, desc.joint_names)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(1.7e9))
    assert choice.text.startswith(f"calibrated gravity model found at {path} and used (joint names and kinematics "
                                  f"fingerprint match): written by ~/calibrate (payload_sampler/sweep) on {when}; "
                                  "to forget it and use the nominal model, delete the file"), choice.text
    assert core.status_values()["calibration"].startswith(f"using {path} (")
    assert f"on {when}; to forget it" in core.status_values()["calibration"]
    path.unlink()  # forgotten as said: deleted, then gravity_model set (to '')
    assert core.reconfigure(config(torque_gain=[GAIN]), {"gravity_model"}) is not None
    assert core.gravity_model is None and core.status_values()["calibration"].startswith("none at ")
