"""`payload-estimation demo`: the simulated pick-estimate-and-move mission, end to end over real DDS.

sim_node (MuJoCo arm with sensor noise and a model error), payload_estimator, payload_sampler and
collision_monitor run as separate processes. This process is the user's task code: before the grasp it
takes an unloaded capture and records the reference excitation (``payload_sampler/record_reference``);
it grasps an unknown object, announcing the grasp (``payload_estimator/grasped``: the collision monitor allows for
the new load instead of stopping the arm at the grasp), and calls ``payload_sampler/sample`` twice on the same grasp,
``mode``
static (ten poses) and then dynamic (one excitation, mass, CoM and inertia); it moves with the
dynamic estimate in the monitor while three contacts are injected, then prints a results table and
writes plots (validation torques, residuals, and the two sampling motions side by side). The
comparison "without payload update" (paper 000 Fig. 6) is the same core observer run on the recorded
joint states without the estimate.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HELP = "simulated pick-estimate-and-move demo: all nodes over real DDS, results table and plots"

MONITOR = "collision_monitor"
UNLOADED_MONITOR = "collision_monitor_unloaded"


@dataclass(frozen=True)
class Scenario:
    """What the demo does, in SI units (angles rad, sim-time seconds)."""

    q_pick: np.ndarray
    payload_mass: float
    payload_com: np.ndarray
    payload_inertia: np.ndarray
    waypoints: np.ndarray  # (k, n) visited after the estimate, ending at q_pick
    segment_time: float
    contacts: tuple[tuple[int, float], ...]  # (link 1..n, |F| N), injected in this order
    contact_gap: float  # s of sim time between contacts
    contact_duration: float
    noise_std: float
    model_error: float
    rate_hz: float
    threshold: float


def scenario(robot: str, fast: bool) -> Scenario:
    from ..sim import START_POSES_DEG

    deg = np.radians
    q_pick = deg(START_POSES_DEG[robot])  # sim_node's documented start pose: the same bent configuration
    moves = deg([[35, -10, 0, 15, 0, -10, 0], [-20, 10, 0, -10, 20, 15, 30], [0, 0, 0, 0, 0, 0, 0]])
    return Scenario(
        q_pick=q_pick,
        payload_mass=3.0,
        payload_com=np.array([0.03, -0.02, 0.11]),
        payload_inertia=np.array([0.012, 0.0, 0.0, 0.012, 0.0, 0.006]),
        waypoints=q_pick + moves,
        segment_time=4.0 if fast else 5.0,
        contacts=((4, 50.0), (6, 40.0), (7, 30.0)),
        contact_gap=3.5 if fast else 4.5,
        contact_duration=0.2,
        noise_std=0.1,
        model_error=0.03,
        rate_hz=250.0 if fast else 500.0,
        threshold=6.0,
    )


def add_arguments(p) -> None:
    p.add_argument("--robot", default="lwr4", choices=["lwr4", "iiwa14"], help="simulated robot (default lwr4)")
    p.add_argument("--out", default="demo_out", help="directory for plots and summary.json (default demo_out)")
    p.add_argument("--fast", action="store_true",
                   help="250 Hz joint_states (default 500) and a shorter move (slow machines)")
    p.add_argument("--seed", type=int, default=7, help="simulator seed: noise and model error (default 7)")
    p.add_argument("--domain-id", type=int, default=None,
                   help="ROS_DOMAIN_ID for the demo's nodes (default: a free one, localhost only)")
    p.add_argument("--online", action="store_true",
                   help="pick and place with the online estimate instead (no sampling motion): the estimate and "
                        "its σ converging during the move, the monitor's thresholds narrowing, a push caught as a "
                        "collision, a drop reported as payload lost; writes online_estimate.png")


def _say(step: str, text: str) -> None:
    print(f"[demo {step}] {text}", flush=True)


PUSH_DIRECTIONS = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0], [-1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]])
"""Base-frame push directions in order of preference: of two that load the joints alike (d and -d always do), the
first is taken, so a vertical push goes down. An upward push under the tool is what a dropped payload looks like:
after the announced grasp the monitor's payload-loss check would call it one (the demo's 30 N on link_7, 78 % of
the 3 kg), and the arm, stopped on the unexplained load, would not resume."""


MAX_AXIAL_DEG = 30.0
"""A scripted push enters the link's capsule within this angle of its normal (its direction at most this far out of
the plane across the capsule's axis): inside the friction cone a contact can hold (45° at μ = 1, what the contact
estimator assumes). The demo's 40 N downward push on lwr4's link_6 was 55° off the normal, a push that would slip:
the estimator explained it on link_7 (p 1.00), where the cap's normal allows it."""


def _contact_direction(dyn, q: np.ndarray, link: int, capsule=None) -> np.ndarray:
    """Unit base-frame direction among ±x, ±y, ±z that loads the joints below ``link`` (1..n) the most (never up:
    :data:`PUSH_DIRECTIONS`); with the link's ``capsule`` (link frame), only directions within MAX_AXIAL_DEG of the
    plane across its axis, or where none is, those directions projected onto that plane (turned down)."""
    jv = dyn.frame_jacobian(q, f"link_{link}")[:3]
    choices = list(PUSH_DIRECTIONS)
    if capsule is not None and capsule.length > 0:
        axis = dyn.forward_kinematics(q, f"link_{link}")[:3, :3] @ ((capsule.b - capsule.a) / capsule.length)
        across = [d for d in PUSH_DIRECTIONS if abs(d @ axis) <= np.sin(np.radians(MAX_AXIAL_DEG))]
        if not across:
            flat = [d - (d @ axis) * axis for d in PUSH_DIRECTIONS]
            across = [v / np.linalg.norm(v) * (-1.0 if v[2] > 0 else 1.0) for v in flat if np.linalg.norm(v) > 0.1]
        choices = across
    best, best_val = None, -1.0
    for d in choices:
        val = float(np.min(np.sort(np.abs(jv.T @ d))[-2:]))  # the two most loaded joints
        if val > best_val:
            best, best_val = d, val
    return best


def node_link_names(desc) -> tuple[str, ...]:
    """The link names the demo's nodes report and sim_node takes: their model is the URDF sim_node publishes
    for ``desc`` (``sim.links``: a URDF's link names), so the table names links as the monitor's log does."""
    from ..model import robot_from_description, to_urdf
    from ..sim import link_names

    return link_names(robot_from_description(to_urdf(desc)))


def run(args) -> int:
    if getattr(args, "online", False):
        from .demo_online import run as run_online

        return run_online(args)
    from ..ros.domain import isolate

    isolate(args.domain_id)
    os.environ.setdefault("MPLBACKEND", "Agg")
    from ..model import load_robot
    from ..ros.bringup import config_file, ros_args, start_processes, stop_processes
    from ..ros.mission import mission_client

    t_wall0 = time.monotonic()
    sc = scenario(args.robot, args.fast)
    desc = load_robot(args.robot)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vec = lambda v: "[" + ",".join(repr(float(x)) for x in v) + "]"  # noqa: E731 - doubles, never ints
    common = [f"robot:={args.robot}"]
    sim = [f"rate_hz:={sc.rate_hz}", f"noise_std:=[{sc.noise_std}]", f"model_error:={sc.model_error}",
           f"seed:={args.seed}", f"initial_positions:={vec(sc.q_pick)}", f"payload_mass:={sc.payload_mass}",
           f"payload_com:={vec(sc.payload_com)}", f"payload_inertia:={vec(sc.payload_inertia)}",
           f"contact_duration:={sc.contact_duration}"]
    # The demo's own settings, node by node, in a second file: the nodes take their model from the URDF
    # sim_node publishes on robot_description (as on a real robot), and wall-clock patience for a loaded
    # 2-core machine (the robot-side defaults are tighter).
    overrides = out / "demo_params.yaml"
    overrides.write_text(
        "/**/payload_estimator:\n  ros__parameters: {robot: ''}\n"
        "/**/payload_sampler:\n  ros__parameters: {robot: '', service_timeout: 15.0, joint_state_timeout: 3.0, "
        "collision_clear_timeout: 3.0, pick_rest_timeout: 10.0}\n"
        "/**/collision_monitor:\n  ros__parameters: {robot: '', residual_decimation: 2}\n")
    pfile = config_file(args.robot)
    _say("1/7", f"starting sim_node ({args.robot}, {sc.rate_hz:.0f} Hz joint_states, torque noise "
                f"{sc.noise_std} N m, {100 * sc.model_error:.0f} % model error), payload_estimator, payload_sampler, "
                f"collision_monitor (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']})")
    procs = start_processes(["sim", "estimator", "sampler", "monitor"],
                            ros_args(pfile, None, True, (), common + sim) + ["--params-file", str(overrides)])
    try:
        with mission_client(desc.joint_names, monitors=(MONITOR,), name="demo_task") as client:
            results = _mission(client, desc, sc)
    except Exception as exc:  # noqa: BLE001 - report any failure as a failed demo, after cleanup
        print(f"[demo] FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_processes(procs)
    results["wall_time_s"] = time.monotonic() - t_wall0
    _report(results, desc, sc, out)
    return 0 if results["ok"] else 1


def _mission(client, desc, sc: Scenario) -> dict:
    from ..collision import capsule_geometry, push_point
    from ..model import RigidBodyDynamics
    from ..sampling import RETRIED_NOTE

    dyn = RigidBodyDynamics(desc)
    geometry = capsule_geometry(desc)
    client.wait_for(lambda: client.q is not None, 60.0, "joint_states from sim_node")
    client.wait_for(lambda: client.now() > 0.5, 60.0, "the simulation to run")
    nodes = ("payload_estimator", "payload_sampler", MONITOR)
    client.wait_for(lambda: client.nodes_ready(nodes), 60.0, "every node's robot model (a status below ERROR)")
    _say("2/7", "before the grasp: an unloaded capture at the pick configuration (anchors the static fit) and "
                "payload_sampler/record_reference (the excitation without the object, for the dynamic fit)")
    res = client.call_until_success("payload_estimator/capture_unloaded")
    if not res.success:
        raise RuntimeError(f"capture_unloaded refused: {res.message}")
    t_ref0 = client.now()
    res = client.call_retrying("payload_sampler/record_reference", 180.0, lambda text: _say("2/7", text))
    if RETRIED_NOTE in res.message:
        _say("2/7", f"record_reference {'succeeded' if res.success else 'failed'} on its second attempt")
    t_ref1 = client.now()
    if not res.success:
        raise RuntimeError(f"record_reference failed: {res.message}")
    _say("2/7", f"reference run: {t_ref1 - t_ref0:.2f} s sim")
    _say("2/7", "grasp: payload_estimator/grasped (announced: the monitor allows for the new load and learns it at "
                "rest), the gripper closes (sim_node/attach_payload), payload_estimator/grasped again (it holds it)")
    t_grasp = client.now()
    client.announce("payload_estimator/grasped")
    if not client.call("sim_node/attach_payload").success:
        raise RuntimeError("sim_node refused to attach the payload")
    client.announce("payload_estimator/grasped")  # attaching is instantaneous here: the gripper holds it now
    # as task code would after closing a gripper: let the arm take the new load and come to rest
    # (the pick configuration is wherever it rests)
    client.sleep_sim(0.5)
    client.wait_for(lambda: np.max(np.abs(client.q_dot)) < 2e-3, 60.0, "the arm to come to rest after the grasp")
    client.sleep_sim(0.3)
    t_rest = client.now()
    # on a loaded machine the monitor can lag the 500 Hz stream: sample only once it has seen the rest, so
    # its provisional payload comes from a settled residual
    client.wait_for(lambda: client.residual_arrays(MONITOR)[0][-1:].tolist() > [t_rest], 60.0,
                    "the collision monitor to catch up")

    samples = {}
    for step, mode, what in (("3/7", "static", "10 static poses within ±7°"),
                             ("4/7", "auto", "one excitation within ±7°, differential against the reference run")):
        client.set_parameters("payload_sampler", {"mode": mode})
        _say(step, f"payload_sampler/sample (mode {mode}): {what}, estimate, back to the pick configuration")
        seen = client.estimates
        t0, wall0 = client.now(), time.monotonic()
        res = client.call_retrying("payload_sampler/sample", 180.0, lambda text, step=step: _say(step, text))
        t1, wall = client.now(), time.monotonic() - wall0
        if not res.success:
            raise RuntimeError(f"sampling ({mode}) failed: {res.message}")
        client.wait_for(lambda seen=seen: client.estimates > seen and client.estimate.mass > 0, 10.0,
                        "payload/estimate")
        est = client.estimate
        kind = "dynamic" if mode == "auto" else "static"
        samples[kind] = {"estimate": est, "std": dict(client.estimator_status), "t": (t0, t1), "wall_s": wall,
                         "message": res.message}
        inertia = ("" if est.inertia is None else
                   f", inertia diag {np.round(np.asarray(est.inertia)[[0, 3, 5]], 4).tolist()} kg m²")
        _say(step, f"estimate: {est.mass:.3f} kg, CoM {np.round(1e3 * est.com, 1)} mm{inertia} "
                   f"({t1 - t0:.2f} s sim, {wall:.1f} s wall)")
        client.wait_for(lambda: np.max(np.abs(client.q_dot)) < 2e-3, 60.0, "the arm to rest after sampling")
    est = samples["dynamic"]["estimate"]

    _say("5/7", f"moving with the monitor armed (dynamic estimate in use); {len(sc.contacts)} contacts will be "
                "injected")
    t_move0 = client.now()
    times = [sc.segment_time * (k + 1) for k in range(len(sc.waypoints))]
    client.send_trajectory(sc.waypoints, times)
    contacts = []
    names = node_link_names(desc)
    for k, force in sc.contacts:
        client.sleep_sim(sc.contact_gap)
        q = client.q
        capsule = geometry.capsules[k - 1]
        f_link = dyn.forward_kinematics(q, f"link_{k}")[:3, :3].T @ (force * _contact_direction(dyn, q, k, capsule))
        # on the link's surface where the push enters head-on (at the frame origin it would act on the
        # joint axis, inside the arm, where no contact can happen and the link is not observable)
        t_c = client.push(names[k - 1], f_link, point=push_point(capsule, f_link, 0.6))
        contacts.append((t_c, t_c + sc.contact_duration, names[k - 1], force))
        _say("5/7", f"  contact: {force:.0f} N on {names[k - 1]} at t = {t_c - t_move0:.2f} s")
    client.wait_for(lambda: np.max(np.abs(client.q - sc.q_pick)) < np.radians(0.5)
                    and np.max(np.abs(client.q_dot)) < 0.01, 120.0, "the move to finish")
    client.sleep_sim(0.5)
    t_end = client.now()
    return {"estimate": est, "samples": samples, "reference_run_s": t_ref1 - t_ref0, "t_grasp": t_grasp,
            "t_move": (t_move0, t_end), "contacts": contacts,
            "states": client.snapshot(),
            "residuals": {MONITOR: client.residual_arrays(MONITOR)},
            "collisions": {MONITOR: list(client.collisions[MONITOR]), UNLOADED_MONITOR: []},
            "node_contacts": list(client.contacts[MONITOR]), "ok": True}


def _unloaded_residual(desc, states: dict, t_from: float) -> tuple[np.ndarray, np.ndarray]:
    """The residual the monitor would have computed without the payload update (same observer and gain
    as the node, on the recorded joint states from ``t_from``)."""
    from ..collision import MomentumObserver
    from ..model import RigidBodyDynamics

    t, q = states["q"]
    _, dq = states["dq"]
    _, tau = states["tau"]
    keep = t >= t_from
    obs = MomentumObserver(RigidBodyDynamics(desc), 25.0)
    r = np.array([obs.update(*x) for x in zip(t[keep], q[keep], dq[keep], tau[keep])])
    return t[keep], r


def _node_contacts(node_contacts: list[dict], windows) -> list[str]:
    """Per injected contact, the monitor node's own answer (its ``~/contact`` message, the line it logs: link by
    the model's name, its probability, force or its 95 % range) for the first contact it reported within the
    contact's window (+0.5 s); '-' if it reported none. One answer per contact, the same everywhere."""
    out = []
    for a, b in windows:
        c = next((c for c in node_contacts if a <= c["stamp"] <= b + 0.5), None)
        out.append("-" if c is None else c["summary"].removeprefix("contact on "))
    return out


def raised(flags: list[tuple[float, bool]], t0: float, t1: float) -> int:
    """How many collisions the monitor raised (``~/collision`` True, as (time, flag)) between ``t0`` and ``t1`` s."""
    return sum(1 for t, v in flags if v and t0 <= t <= t1)


def _accuracy(smp: dict, sc: Scenario, flags: list[bool]) -> dict:
    """One sample call's figures against the simulator's truth (%, mm, s; ``flags``: the monitor's
    collision flags during the call)."""
    e = smp["estimate"]
    trace_true = float(np.asarray(sc.payload_inertia)[[0, 3, 5]].sum())
    return {"mass_error_pct": 100 * (e.mass - sc.payload_mass) / sc.payload_mass,
            "com_error_mm": 1e3 * float(np.linalg.norm(e.com - sc.payload_com)),
            "trace_error_pct": None if e.inertia is None else
            100 * (float(np.asarray(e.inertia)[[0, 3, 5]].sum()) / trace_true - 1),
            "sample_call_sim_s": smp["t"][1] - smp["t"][0], "sample_call_wall_s": smp["wall_s"],
            "std_mass": float(smp["std"].get("std_mass", "nan")), "estimate": e.to_dict(),
            "collisions_during_sampling": sum(1 for v in flags if v), "message": smp["message"]}


def _report(res: dict, desc, sc: Scenario, out: Path) -> None:
    from ..collision import CollisionDetector, score_detections, time_above
    from ..reporting import (
        ContactMark,
        SamplingMotion,
        plot_residuals,
        plot_sampling_motion,
        plot_torques,
        results_table,
        validation_torques,
    )

    _say("6/7", "scoring and plotting")
    est = res["estimate"]
    t0, t1 = res["t_move"]
    windows = [(a, b) for a, b, _, _ in res["contacts"]]
    res["residuals"][UNLOADED_MONITOR] = _unloaded_residual(desc, res["states"], res["t_grasp"] - 0.5)
    scores, alarm_time, live = {}, {}, {}
    for m in (MONITOR, UNLOADED_MONITOR):
        # Detection times from the monitor's own residual stream (stamped with the sample time), through
        # the same detector the node runs; the node's live ~/collision flags are counted alongside.
        tr, rr = res["residuals"][m]
        keep = (tr >= t0) & (tr <= t1)
        det = CollisionDetector(desc.n, sc.threshold, link_names=node_link_names(desc))
        for t, r in zip(tr[keep], rr[keep]):
            det.update(t, r)
        events = det.events + ([det.current] if det.in_collision else [])
        scores[m] = score_detections(windows, [e.detection_time for e in events], window=0.5)
        live[m] = sum(1 for t, v in res["collisions"][m] if v and t0 <= t <= t1)
        alarm_time[m] = time_above(tr[keep], rr[keep], sc.threshold, [(a, b + 1.0) for a, b in windows])
    contact_estimates = _node_contacts(res["node_contacts"], windows)
    samples = res["samples"]
    tq, qs = res["states"]["q"]
    _, taus = res["states"]["tau"]
    motion = []
    for kind, label in (("static", "static poses (mode static)"), ("dynamic", "one excitation (mode dynamic)")):
        a, b = samples[kind]["t"]
        keep = (tq >= a) & (tq <= b)
        motion.append(SamplingMotion(label, tq[keep] - a, qs[keep], taus[keep]))
    f7 = plot_sampling_motion(out / "fig7_sampling_motion.png", motion, desc.joint_names, 7.0)

    # Fig. 5: measured vs predicted torques on the validation move (free motion, 100 Hz grid)
    t, q = res["states"]["q"]
    _, tau = res["states"]["tau"]
    keep = (t >= t0) & (t <= t1)
    vt = validation_torques(desc, est.body(), t[keep], q[keep], tau[keep])
    tg, taug, pred, pred0 = vt.t, vt.measured, vt.predicted, vt.unloaded
    free = np.ones(tg.size, bool)
    for a, b in windows:
        free &= ~((tg >= a) & (tg <= b + 2.5))  # contact, stop and resume
    rms = np.sqrt(np.mean((taug[free] - pred[free]) ** 2, axis=0))
    rms0 = np.sqrt(np.mean((taug[free] - pred0[free]) ** 2, axis=0))
    f5 = plot_torques(out / "fig5_validation_torques.png", tg - t0, taug, pred, desc.joint_names,
                      f"{desc.name}: measured vs model torques on the move after the estimate "
                      "(Gaz & De Luca 2017, Fig. 5)",
                      tau_unloaded=pred0, mask=free)
    panels = []
    for m, title in ((MONITOR, "with the payload estimate (eq. 48)"), (UNLOADED_MONITOR, "without payload update")):
        tr, rr = res["residuals"][m]
        keep = (tr >= res["t_grasp"] - 0.5) & (tr <= t1)
        panels.append((f"{desc.name} residual {title}", tr[keep] - t0, rr[keep]))
    marks = [ContactMark(a - t0, b - t0, link, f) for a, b, link, f in res["contacts"]]
    dets = [[t - t0 for t in scores[m].detection_times + scores[m].false_alarms if np.isfinite(t)]
            for m in (MONITOR, UNLOADED_MONITOR)]
    (s0, s1), (d0, d1) = samples["static"]["t"], samples["dynamic"]["t"]
    phases = [(res["t_grasp"] - t0, s0 - t0, "grasp"), (s0 - t0, s1 - t0, "static sampling"),
              (d0 - t0, d1 - t0, "dynamic"), (0.0, t1 - t0, "move with contacts")]
    f6 = plot_residuals(out / "fig6_residuals.png", panels, desc.joint_names, sc.threshold, marks, dets, phases)

    acc = {kind: _accuracy(smp, sc, [v for t, v in res["collisions"][MONITOR] if smp["t"][0] <= t <= smp["t"][1]])
           for kind, smp in samples.items()}
    st, dy = acc["static"], acc["dynamic"]
    at_grasp = raised(res["collisions"][MONITOR], res["t_grasp"], samples["static"]["t"][0])
    mass_err, com_err = dy["mass_error_pct"], dy["com_error_mm"]
    s_on, s_off = scores[MONITOR], scores[UNLOADED_MONITOR]
    n_c = len(windows)
    es = samples["static"]["estimate"]
    mm = lambda v: np.round(1e3 * np.asarray(v), 1).tolist()  # noqa: E731
    rows = [
        ("payload mass [kg] static / dynamic", sc.payload_mass, f"{es.mass:.4f} / {est.mass:.4f}",
         f"{st['mass_error_pct']:+.2f} % / {mass_err:+.2f} % (σ {st['std_mass']:.4f} / {dy['std_mass']:.4f} kg)"),
        ("payload CoM [mm] static", mm(sc.payload_com), mm(es.com), f"|error| {st['com_error_mm']:.2f} mm"),
        ("payload CoM [mm] dynamic", mm(sc.payload_com), mm(est.com), f"|error| {com_err:.2f} mm"),
        ("payload inertia diag [kg m²] dynamic", np.round(np.asarray(sc.payload_inertia)[[0, 3, 5]], 4).tolist(),
         "-" if est.inertia is None else np.round(np.asarray(est.inertia)[[0, 3, 5]], 4).tolist(),
         (f"the excitation did not determine {', '.join(est.undetermined) or 'it'}" if dy["trace_error_pct"] is None
          else f"trace {dy['trace_error_pct']:+.1f} %") + "; the static poses never determine it"),
        ("sample call (sim / wall) [s] static", "", f"{st['sample_call_sim_s']:.2f} / {st['sample_call_wall_s']:.2f}",
         "Gaz & De Luca 2017: 10 × (move + 1 s)"),
        ("sample call (sim / wall) [s] dynamic", "", f"{dy['sample_call_sim_s']:.2f} / {dy['sample_call_wall_s']:.2f}",
         f"+ {res['reference_run_s']:.2f} s reference run before the grasp"),
        ("collisions at the grasp", 0, at_grasp, "announced: payload_estimator/grasped"),
        ("collisions during sampling (static, dynamic)", "0, 0",
         f"{st['collisions_during_sampling']}, {dy['collisions_during_sampling']}", ""),
        ("contacts detected (with estimate)", n_c, s_on.detected,
         "delays " + ", ".join(f"{1e3 * d:.0f}" for d in s_on.delays if np.isfinite(d)) + " ms"),
        *((f"contact {k}: link, force", f"{lk} {f:.0f} N", answer,
           "the monitor node's answer: link (probability), force (95 % range)" if k == 1 else "")
          for k, ((_, _, lk, f), answer) in enumerate(zip(res["contacts"], contact_estimates), start=1)),
        ("false alarms (with estimate)", 0, len(s_on.false_alarms),
         f"{alarm_time[MONITOR]:.2f} s above threshold; node raised {live[MONITOR]} stops"),
        ("contacts detected (no payload update)", n_c, s_off.detected, ""),
        ("false alarms (no payload update)", 0, len(s_off.false_alarms),
         f"{alarm_time[UNLOADED_MONITOR]:.2f} s above threshold"),
        ("validation RMS torque error [N m]", "", f"{np.sqrt(np.mean(rms ** 2)):.3f}",
         f"without payload: {np.sqrt(np.mean(rms0 ** 2)):.3f}"),
    ]
    table = results_table(rows)
    ok = (s_on.detected == n_c and not s_on.false_alarms and abs(mass_err) < 5.0 and abs(st["mass_error_pct"]) < 5.0)
    summary = {
        "robot": desc.name, "estimate": est.to_dict(),
        "truth": {"mass": sc.payload_mass, "com": sc.payload_com.tolist()},
        "mass_error_pct": mass_err, "com_error_mm": com_err,
        "static": st, "dynamic": dy, "reference_run_sim_s": res["reference_run_s"],
        "contacts": [{"link": lk, "force_N": f, "t": a - t0, "estimated": e}
                     for (a, _, lk, f), e in zip(res["contacts"], contact_estimates)],
        "with_estimate": {"detected": s_on.detected, "delays_s": list(s_on.delays),
                          "false_alarms": len(s_on.false_alarms), "time_above_s": alarm_time[MONITOR]},
        "without_update": {"detected": s_off.detected, "false_alarms": len(s_off.false_alarms),
                           "time_above_s": alarm_time[UNLOADED_MONITOR]},
        "collisions_at_grasp": at_grasp,
        "collisions_during_sampling": st["collisions_during_sampling"] + dy["collisions_during_sampling"],
        "validation_rms_Nm": rms.tolist(), "validation_rms_unloaded_Nm": rms0.tolist(),
        "wall_time_s": res["wall_time_s"], "plots": [str(f5), str(f6), str(f7)], "ok": bool(ok),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    _say("7/7", f"results ({desc.name}, {res['wall_time_s']:.0f} s wall):")
    print(table)
    print(f"\nplots: {f5}\n       {f6}\n       {f7}\nsummary: {out / 'summary.json'}")
    res["ok"] = ok
