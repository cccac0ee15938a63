"""`payload-estimation demo --online`: pick and place with the online estimate (issue 32), no sampling motion.

sim_node (MuJoCo arm, torque noise, model error), payload_estimator and collision_monitor run as processes over
real DDS. This process is the task code: it leaves the arm at rest unloaded, announces the grasp
(``payload_estimator/grasped``), attaches the object in the simulator and announces it again, then commands three
ordinary point-to-point moves on ``joint_trajectory`` (pick -> place -> pick -> place). It records, from the
topics only, the estimate on ``payload/estimate`` with its σ (``payload_estimator/online_estimate``), the
monitor's threshold scale (``collision_monitor/status``) and residual. Move 1 is undisturbed (the estimate
converges: scored at its end); during move 2 it pushes on a link (``sim_node/apply_wrench``: must be a collision,
the arm stops and resumes); during move 3 the object drops (``sim_node/detach_payload``: must be ``payload lost``,
the estimate back to 0 kg, the arm not stopped).
The reference is MuJoCo's payload (``sim_node/true_payload``). Writes ``online_estimate.png`` (estimate and
σ, thresholds and residual, contact and drop marked), ``online_summary.json`` and prints a table.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .demo import MONITOR, _contact_direction, _say, node_link_names

PUSH_LEAD = 0.4
"""s of sim time between scheduling the push and its start (the client's clock may lag the simulator's)."""

K_SIGMA = 3.0
"""The estimate must lie within this many σ of MuJoCo's payload (per mass and CoM component)."""


@dataclass(frozen=True)
class OnlineScenario:
    """What the online demo does, in SI units (angles rad, sim-time seconds)."""

    q_pick: np.ndarray
    q_place: np.ndarray
    move_time: float  # s, each point-to-point move
    payload_mass: float
    payload_com: np.ndarray
    payload_inertia: np.ndarray
    contact_link: int  # 1..n
    contact_force: float  # N
    contact_at: float  # s after the first move's start
    drop_at: float  # s after the second move's start
    contact_duration: float
    noise_std: float
    model_error: float
    rate_hz: float


def online_scenario(robot: str, fast: bool) -> OnlineScenario:
    from ..sim import START_POSES_DEG

    q_pick = np.radians(START_POSES_DEG[robot])
    move = np.radians([45, -15, 15, 20, -25, 30, 30])  # 180 deg over all joints: an ordinary pick-to-place move
    return OnlineScenario(
        q_pick=q_pick, q_place=q_pick + move, move_time=3.0, payload_mass=3.0,
        payload_com=np.array([0.03, -0.02, 0.11]), payload_inertia=np.array([0.012, 0.0, 0.0, 0.012, 0.0, 0.006]),
        contact_link=4, contact_force=40.0, contact_at=1.5, drop_at=1.0, contact_duration=0.2,
        noise_std=0.1, model_error=0.03, rate_hz=250.0 if fast else 500.0)


def run(args) -> int:
    from ..ros.domain import isolate

    isolate(args.domain_id)
    os.environ.setdefault("MPLBACKEND", "Agg")
    from ..model import load_robot
    from ..ros.bringup import config_file, ros_args, start_processes, stop_processes
    from ..ros.mission import mission_client

    t_wall0 = time.monotonic()
    sc = online_scenario(args.robot, args.fast)
    desc = load_robot(args.robot)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vec = lambda v: "[" + ",".join(repr(float(x)) for x in v) + "]"  # noqa: E731 - doubles, never ints
    sim = [f"robot:={args.robot}", f"rate_hz:={sc.rate_hz}", f"noise_std:=[{sc.noise_std}]",
           f"model_error:={sc.model_error}", f"seed:={args.seed}", f"initial_positions:={vec(sc.q_pick)}",
           f"payload_mass:={sc.payload_mass}", f"payload_com:={vec(sc.payload_com)}",
           f"payload_inertia:={vec(sc.payload_inertia)}", f"contact_duration:={sc.contact_duration}"]
    overrides = out / "demo_online_params.yaml"  # the nodes take their model from sim_node's robot_description
    overrides.write_text("/**/payload_estimator:\n  ros__parameters: {robot: ''}\n"
                         "/**/collision_monitor:\n  ros__parameters: {robot: '', residual_decimation: 2}\n")
    _say("online 1/7", f"starting sim_node ({args.robot}, {sc.rate_hz:.0f} Hz joint_states, torque noise "
                       f"{sc.noise_std} N m, {100 * sc.model_error:.0f} % model error), payload_estimator, "
                       f"collision_monitor (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}); no payload_sampler: "
                       "no sampling motion")
    procs = start_processes(["sim", "estimator", "monitor"],
                            ros_args(config_file(args.robot), None, True, (), sim) + ["--params-file", str(overrides)])
    try:
        with mission_client(desc.joint_names, monitors=(MONITOR,), name="demo_online_task") as client:
            res = _mission(client, desc, sc)
    except Exception as exc:  # noqa: BLE001 - report any failure as a failed demo, after cleanup
        print(f"[demo online] FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_processes(procs)
    res["wall_time_s"] = time.monotonic() - t_wall0
    summary = _report(res, desc, sc, out)
    return 0 if summary["ok"] else 1


def _at_rest(client, q_target: np.ndarray | None = None) -> bool:
    near = q_target is None or float(np.max(np.abs(client.q - q_target))) < np.radians(0.5)
    return near and float(np.max(np.abs(client.q_dot))) < 0.01


def _trigger(client, service: str) -> str:
    res = client.call(service)
    if not res.success:
        raise RuntimeError(f"{service} refused: {res.message}")
    return res.message


def _mission(client, desc, sc: OnlineScenario) -> dict:
    from ..collision import capsule_geometry, push_point
    from ..model import RigidBodyDynamics

    dyn = RigidBodyDynamics(desc)
    client.wait_for(lambda: client.q is not None, 60.0, "joint_states from sim_node")
    client.wait_for(lambda: client.now() > 0.5, 60.0, "the simulation to run")
    try:
        client.wait_for(lambda: client.nodes_ready(("payload_estimator", MONITOR)), 60.0,
                        "every node's robot model (a status below ERROR)")
    except RuntimeError as exc:
        last = {n: (client.levels.get(n), log[-1][1]) for n, log in client.status_log.items() if log}
        raise RuntimeError(f"{exc}; the nodes' last status: {last}") from exc
    thresholds = np.asarray(client.get_parameters(MONITOR, ["thresholds"])["thresholds"], float)
    client.wait_for(lambda: _at_rest(client), 60.0, "the arm to rest at the pick pose")
    client.sleep_sim(1.0)  # the unloaded rest the online estimate anchors on

    _say("online 2/7", "grasp: payload_estimator/grasped (announced), the gripper closes (sim_node/attach_payload), "
                       "payload_estimator/grasped again (the gripper holds it: estimate from the next motion)")
    t_grasp = client.now()
    client.announce("payload_estimator/grasped")
    _trigger(client, "sim_node/attach_payload")
    answer = client.announce("payload_estimator/grasped")
    _say("online 2/7", f"payload_estimator: {answer}")
    client.sleep_sim(0.5)  # let the arm take the load (the monitor learns it at rest)
    client.wait_for(lambda: _at_rest(client), 60.0, "the arm to rest after the grasp")

    _say("online 3/7", f"move 1 (pick -> place, {sc.move_time:.1f} s, "
                       f"{np.degrees(np.abs(sc.q_place - sc.q_pick).sum()):.0f} deg in total): the estimate "
                       "converges on the way")
    t_move1 = client.now()
    client.send_trajectory(sc.q_place[None, :], [sc.move_time])
    client.wait_for(lambda: _at_rest(client, sc.q_place), 120.0, "move 1 to finish")
    t_end1 = client.now()
    est = client.estimate
    _say("online 3/7", f"at the place pose: {est.mass:.3f} kg, CoM {np.round(1e3 * est.com, 1)} mm")
    client.sleep_sim(0.5)

    _say("online 4/7", f"move 2 (place -> pick, {sc.move_time:.1f} s): a {sc.contact_force:.0f} N push on link "
                       f"{sc.contact_link} at {sc.contact_at:.1f} s (sim_node/apply_wrench)")
    t_move2 = client.now()
    client.send_trajectory(sc.q_pick[None, :], [sc.move_time])
    client.sleep_sim(sc.contact_at - PUSH_LEAD)
    names = node_link_names(desc)
    k = sc.contact_link
    q = client.q
    capsule = capsule_geometry(desc).capsules[k - 1]
    f_link = dyn.forward_kinematics(q, f"link_{k}")[:3, :3].T @ (sc.contact_force
                                                                 * _contact_direction(dyn, q, k, capsule))
    # scheduled PUSH_LEAD s ahead (sim time): sim_node applies it then, however late the message arrives
    t_contact = client.push(names[k - 1], f_link, delay=PUSH_LEAD, point=push_point(capsule, f_link, 0.6))
    client.wait_for(lambda: _at_rest(client, sc.q_pick), 120.0, "move 2 to finish (stop and resume included)")
    client.sleep_sim(0.5)

    _say("online 5/7", f"move 3 (pick -> place, {sc.move_time:.1f} s): the object slips out of the gripper at "
                       f"{sc.drop_at:.1f} s (sim_node/detach_payload)")
    t_move3 = client.now()
    client.send_trajectory(sc.q_place[None, :], [sc.move_time])
    client.sleep_sim(sc.drop_at)
    t_detach = client.now()  # the drop happens after this (the simulator's clock leads the client's)
    _trigger(client, "sim_node/detach_payload")
    t_detached = client.now()  # ... and before this (the service answers after the detach)
    client.wait_for(lambda: _at_rest(client, sc.q_place), 120.0, "move 3 to finish")
    client.sleep_sim(1.0)
    t_end = client.now()
    with client._lock:
        status_log = {k: list(v) for k, v in client.status_log.items()}
        lost = list(client.lost[MONITOR])
        estimates, online, truth = list(client.estimate_log), list(client.online), list(client.truth)
    return {"t_grasp": t_grasp, "t_move1": t_move1, "t_end1": t_end1, "t_move2": t_move2, "t_move3": t_move3,
            "t_end": t_end, "t_contact": t_contact, "t_detach": (t_detach, t_detached), "contact_link": names[k - 1],
            "thresholds": thresholds,
            "estimates": estimates, "online": online, "truth": truth, "status": status_log, "lost": lost,
            "collisions": list(client.collisions[MONITOR]), "contacts": list(client.contacts[MONITOR]),
            "residual": client.residual_arrays(MONITOR), "states": client.snapshot()}


# ------------------------------------------------------------------------------------------------ analysis
def com_std(mass: float, com, cov) -> np.ndarray:
    """σ (m) of the CoM c = h / m from the 4 x 4 covariance of (m, h = m c) (kg, kg m): first order."""
    c = np.asarray(com, float)
    jac = np.hstack([-c[:, None] / mass, np.eye(3) / mass])  # dc/d(m, h)
    return np.sqrt(np.maximum(np.diag(jac @ np.asarray(cov, float) @ jac.T), 0.0))


def estimate_series(res: dict) -> dict[str, np.ndarray]:
    """The online estimates (stream time s, mass kg, σ kg, CoM m (k, 3), σ m (k, 3)) from
    ``payload_estimator/online_estimate``: each carries the estimate published with it on payload/estimate."""
    rows = [(o["t"], o["mass"], np.sqrt(o["gravity_covariance"][0][0]), o["com"],
             com_std(o["mass"], o["com"], o["gravity_covariance"])) for o in res["online"] if o["mass"] > 0]
    if not rows:
        return {"t": np.zeros(0), "mass": np.zeros(0), "std_mass": np.zeros(0), "com": np.zeros((0, 3)),
                "std_com": np.zeros((0, 3))}
    t, m, sm, c, sc = zip(*rows)
    return {"t": np.array(t), "mass": np.array(m), "std_mass": np.array(sm), "com": np.array(c),
            "std_com": np.array(sc)}


def scale_series(res: dict) -> tuple[np.ndarray, np.ndarray]:
    """The monitor's ``threshold_scale`` (largest over the joints) from its status: (stamp s, scale)."""
    rows = [(t, float(v["threshold_scale"])) for t, _, v in res["status"].get(MONITOR, []) if "threshold_scale" in v]
    return (np.array([r[0] for r in rows]), np.array([r[1] for r in rows])) if rows else (np.zeros(0), np.zeros(0))


def sigma_thresholds(res: dict, dyn, k_sigma: float = K_SIGMA, step: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """The monitor's thresholds (N m, (k, n)) on a ``step`` s grid from the published σ: each joint's base plus
    ``k_sigma`` x the σ of the estimate's gravity torque at the recorded pose (collision_monitor's rule), from
    each ``payload_estimator/online_estimate`` until the next one, none after the payload was reported lost."""
    base = np.broadcast_to(res["thresholds"], (dyn.n,))
    tq, q = res["states"]["q"]
    online = sorted(res["online"], key=lambda o: o["t"])
    lost = [x["time"] for x in res["lost"] if x["verdict"] == "payload lost"]
    end = min(lost) if lost else res["t_end"]
    grid = np.arange(tq[0], tq[-1], step) if len(tq) else np.zeros(0)
    stamps = np.array([o["t"] for o in online])
    out = np.tile(base, (grid.size, 1)).astype(float)
    for i, g in enumerate(grid):
        k = int(np.searchsorted(stamps, g, side="right")) - 1
        if k < 0 or g >= end:
            continue
        y = dyn.payload_gravity_regressor(q[min(int(np.searchsorted(tq, g)), len(tq) - 1)])
        cov = np.asarray(online[k]["gravity_covariance"], float)
        out[i] = base + k_sigma * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", y, cov, y), 0.0))
    return grid, out


def drop_time(res: dict) -> float:
    """When the payload left (s): the joint_states sample where the measured torque steps the most between the
    detach request and its answer (a 3 kg payload's gravity torque steps by N m in one sample; the motion and the
    0.1 N m noise change it by hundredths). ``sim_node/true_payload``'s stamp is read after the detach, when the
    physics thread may have run on (tens of ms on a loaded machine): only a bound."""
    t, tau = res["states"]["tau"]
    lo, hi = res["t_detach"]
    keep = np.flatnonzero((t > lo - 0.02) & (t <= hi + 0.05))
    if keep.size < 2:
        return float("nan")
    k = keep[1:][np.argmax(np.max(np.abs(tau[keep[1:]] - tau[keep[1:] - 1]), axis=1))]
    return float(t[k])


def _first(times, after: float, before: float = np.inf) -> float:
    return next((t for t in sorted(times) if after <= t <= before), float("nan"))


def _value_at(t: np.ndarray, v: np.ndarray, at: float):
    """The last value published at or before ``at`` (None before the first)."""
    k = int(np.searchsorted(t, at, side="right")) - 1
    return None if k < 0 else v[k]


def outcomes(res: dict, sc: OnlineScenario) -> dict:
    """The demo's figures against MuJoCo's payload and the injected events (s, kg, mm, N m)."""
    e = estimate_series(res)
    truth_m, truth_c = sc.payload_mass, sc.payload_com
    t0, t_end1, t_contact, t2, t3 = res["t_move1"], res["t_end1"], res["t_contact"], res["t_move2"], res["t_move3"]
    t_drop = drop_time(res)
    during = (e["t"] >= t0) & (e["t"] <= t_end1)
    first = int(np.argmax(during)) if during.any() else None
    last = int(np.flatnonzero(e["t"] <= t2)[-1]) if (e["t"] <= t2).any() else None
    after_push = int(np.flatnonzero(e["t"] <= t3)[-1]) if (e["t"] <= t3).any() else None

    def at(k):
        if k is None:
            return None
        err_c = e["com"][k] - truth_c
        return {"t": float(e["t"][k] - t0), "mass": float(e["mass"][k]), "std_mass": float(e["std_mass"][k]),
                "mass_error_pct": 100 * float(e["mass"][k] - truth_m) / truth_m,
                "com_mm": (1e3 * e["com"][k]).round(1).tolist(),
                "std_com_mm": (1e3 * e["std_com"][k]).round(1).tolist(),
                "com_error_mm": (1e3 * err_c).round(1).tolist(),
                "com_error_norm_mm": float(1e3 * np.linalg.norm(err_c)),
                "within_k_sigma": bool(abs(e["mass"][k] - truth_m) <= K_SIGMA * e["std_mass"][k]
                                       and np.all(np.abs(err_c) <= K_SIGMA * e["std_com"][k]))}

    k1 = np.flatnonzero((e["t"] >= t0) & (e["t"] <= t0 + 1.0))
    ts, scale = scale_series(res)
    tg, th = res["sigma_thresholds"]
    widest = th.max(axis=1) / float(np.max(res["thresholds"])) if th.size else np.zeros(0)

    def widest_at(a: float, b: float) -> list[float] | None:
        keep = (tg >= a) & (tg <= b)
        return [round(float(widest[keep].min()), 3), round(float(widest[keep].max()), 3)] if keep.any() else None

    on = [t for t, v in res["collisions"] if v]
    contact_flag = _first(on, t_contact, t_contact + 1.0)  # the flag waits for the loss check (<= 60 ms)
    status_mon = [v for t, _, v in res["status"].get(MONITOR, []) if "detection_time" in v]
    det_times = sorted({float(v["detection_time"]) for v in status_mon})
    contact_det = _first(det_times, t_contact, t_contact + 0.5)
    lost = [x for x in res["lost"] if x["verdict"] == "payload lost" and x["time"] >= res["t_grasp"]]
    drop = next((x for x in lost if t_drop - 0.05 <= x["detection_time"] <= t_drop + 1.0), None)
    contact_lost = [x for x in res["lost"] if t_contact <= x["time"] <= t_contact + 1.0]
    after_drop = [(t, p) for t, p in res["estimates"] if t >= t_drop]
    zero_at = next((t for t, p in after_drop if p.mass == 0.0), float("nan"))
    alarms = [t for t in on if not (t_contact <= t <= t_contact + 1.0)]
    contact = next((c for c in res["contacts"] if t_contact <= c["stamp"] <= t_contact + 0.5), None)
    tq, q = res["states"]["q"]
    end_err = float(np.degrees(np.max(np.abs(q[-1] - sc.q_place)))) if len(q) else float("nan")
    return {
        "estimates": int(during.sum()), "first": at(first), "at_1s": at(int(k1[-1]) if k1.size else None),
        "end_move1": at(last), "end_move2": at(after_push),
        "status_scale_max_move1": float(scale[(ts >= t0) & (ts <= t2)].max()) if ((ts >= t0) & (ts <= t2)).any()
        else None,
        "status_scale_after_drop": _value_at(ts, scale, res["t_end"]),
        "sigma_scale": {"first_estimate": None if first is None else widest_at(e["t"][first], e["t"][first] + 0.1),
                        "move1": widest_at(t0, t_end1), "end_move1": widest_at(t_end1 - 0.1, t_end1),
                        "after_push": widest_at(t_contact + 1.0, t3),
                        "after_drop": widest_at(t_drop + 0.5, res["t_end"])},
        "contact": {"t": t_contact - t2, "link": res["contact_link"], "force_N": sc.contact_force,
                    "flag_delay_ms": 1e3 * (contact_flag - t_contact),
                    "detection_delay_ms": 1e3 * (contact_det - t_contact),
                    "node_answer": None if contact is None else contact["summary"],
                    "taken_for_loss": len(contact_lost)},
        "drop": {"t": t_drop - t3, "reported_lost": drop is not None,
                 "detection_delay_ms": None if drop is None else 1e3 * (drop["detection_time"] - t_drop),
                 "verdict_delay_ms": None if drop is None else 1e3 * (drop["time"] - t_drop),
                 "lost_mass": None if drop is None else drop["lost_mass"],
                 "reason": None if drop is None else drop["reason"],
                 "collision_flags": sum(1 for t in on if t_drop <= t <= t_drop + 1.0),
                 "estimate_zero_after_ms": 1e3 * (zero_at - t_drop),
                 "arm_reached_place_deg": end_err},
        "false_alarms": len(alarms) - sum(1 for t in alarms if t_drop <= t <= t_drop + 1.0),
        "thresholds": res["thresholds"].tolist(),
        "series": {"t": (e["t"] - t0).round(3).tolist(), "mass": e["mass"].round(4).tolist(),
                   "std_mass": e["std_mass"].round(4).tolist(), "com_mm": (1e3 * e["com"]).round(1).tolist(),
                   "std_com_mm": (1e3 * e["std_com"]).round(1).tolist(), "scale_t": (ts - t0).round(3).tolist(),
                   "scale": scale.round(3).tolist()},
        "events": {"grasp": res["t_grasp"] - t0, "move2": t2 - t0, "move3": t3 - t0, "push": t_contact - t0,
                   "drop": t_drop - t0},
    }


def verdict(o: dict) -> tuple[bool, list[str]]:
    """Whether the demo showed what it must (and what failed, in words)."""
    fails = []
    end = o["end_move1"]
    if end is None or not end["within_k_sigma"]:
        fails.append(f"the estimate at the end of move 1 is not within {K_SIGMA:g} σ of MuJoCo's payload: {end}")
    if not (o["status_scale_max_move1"] or 0) > 1.0:
        fails.append("the monitor did not report thresholds widened by the estimate's σ (status threshold_scale "
                     f"{o['status_scale_max_move1']})")
    c = o["contact"]
    if not np.isfinite(c["flag_delay_ms"]) or c["taken_for_loss"]:
        fails.append(f"the push during move 2 was not caught as a collision: {c}")
    d = o["drop"]
    if not d["reported_lost"] or d["collision_flags"] or not np.isfinite(d["estimate_zero_after_ms"]):
        fails.append(f"the drop during move 3 was not reported as payload lost (estimate back to 0 kg): {d}")
    if o["false_alarms"]:
        fails.append(f"{o['false_alarms']} collision flag(s) outside the push")
    return not fails, fails


# ------------------------------------------------------------------------------------------------ report
def plot_online(path: Path, res: dict, sc: OnlineScenario, o: dict) -> Path:
    """Four panels over the time since move 1 started: mass ± 3σ, CoM ± 3σ per axis (MuJoCo's payload dashed),
    the monitor's residual with its threshold (widest joint) and that threshold magnified with the node's own
    status reports; grasp, moves, push and drop marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = res["t_move1"]
    e = estimate_series(res)
    te = e["t"] - t0
    fig, ax = plt.subplots(4, 1, figsize=(11, 12), sharex=True, height_ratios=(1, 1, 1, 0.7))
    ax[0].fill_between(te, e["mass"] - K_SIGMA * e["std_mass"], e["mass"] + K_SIGMA * e["std_mass"], step="post",
                       alpha=0.25, label=f"± {K_SIGMA:g} σ")
    tt = [t - t0 for t, _ in res["truth"]] + [res["t_end"] - t0]
    ax[0].step(tt, [p.mass for _, p in res["truth"]] + [res["truth"][-1][1].mass], "k--", where="post", lw=1,
               alpha=0.6, zorder=2, label="MuJoCo's payload")
    # the estimate over the truth, thick and marked at each update: within 0.1 % it would hide under the truth
    ax[0].step(te, e["mass"], where="post", lw=2.2, zorder=3, label="online estimate (payload/estimate)")
    ax[0].plot(te, e["mass"], ".", ms=3, color="tab:blue", zorder=4)
    ax[0].set_ylabel("mass [kg]")
    ax[0].set_ylim(-0.3, 1.5 * sc.payload_mass)
    for j, name in enumerate("xyz"):
        line, = ax[1].step(te, 1e3 * e["com"][:, j], where="post", label=f"CoM {name}")
        ax[1].fill_between(te, 1e3 * (e["com"][:, j] - K_SIGMA * e["std_com"][:, j]),
                           1e3 * (e["com"][:, j] + K_SIGMA * e["std_com"][:, j]), step="post", alpha=0.15,
                           color=line.get_color())
        ax[1].axhline(1e3 * sc.payload_com[j], color=line.get_color(), ls="--", lw=1)
    ax[1].set_ylabel(f"CoM [mm] (± {K_SIGMA:g} σ; true dashed)")
    ax[1].set_ylim(-150, 250)
    tr, rr = res["residual"]
    keep = tr >= res["t_grasp"] - 0.5
    ax[2].plot(tr[keep] - t0, np.abs(rr[keep]), lw=0.7)
    ts, scale = scale_series(res)
    base = float(np.max(res["thresholds"]))
    tg, th = res["sigma_thresholds"]
    ax[2].plot(tg - t0, th.max(axis=1), "k-", lw=1.5, label="threshold, widest joint")
    ax[2].set_ylabel("|residual| [N m]")
    ax[2].set_ylim(0, 4 * base)
    attach = next((t - t0 for t, p in res["truth"] if p.mass > 0), None)
    if attach is not None:  # the step at the attach is the announced load, not a collision: say so on the plot
        ax[2].annotate("attach: the new load, inside the announced grasp's window\n(subtracted as a payload "
                       "change, not a collision)", (attach, 3.6 * base), xytext=(attach + 0.4, 3.6 * base),
                       fontsize=8, va="top", color="tab:green", arrowprops={"arrowstyle": "->", "color": "tab:green"})
    ax[3].plot(tg - t0, th.max(axis=1), "k-", lw=1.2,
               label=f"base + {K_SIGMA:g} σ of the estimate's gravity torque (from the published σ)")
    ax[3].plot(ts - t0, base * scale, "k.", ms=4, label="collision_monitor status: threshold_scale x base")
    ax[3].set_ylim(0.98 * base, max(1.1 * base, float(th.max()) * 1.03) if th.size else 1.1 * base)
    ax[3].set_ylabel("threshold, widest\njoint [N m]")
    ax[3].set_xlabel("time since move 1 started [s]")
    c, ev = o["contact"], o["events"]
    marks = [(ev["grasp"], "grasp", "tab:green"), (0.0, "move 1", "tab:gray"), (ev["move2"], "move 2", "tab:gray"),
             (ev["push"], f"push {c['force_N']:.0f} N", "tab:red"), (ev["move3"], "move 3", "tab:gray"),
             (ev["drop"], "drop", "tab:purple")]
    for a in ax:
        for x, _label, color in marks:
            a.axvline(x, color=color, ls=":", lw=1.2)
        a.grid(alpha=0.3)
    for x, label, color in marks:
        ax[0].annotate(label, (x, 1.42 * sc.payload_mass), color=color, fontsize=8, rotation=90, va="top", ha="right")
    ax[0].legend(loc="lower right", fontsize=8)
    ax[1].legend(loc="lower right", fontsize=8, ncol=3)
    ax[2].legend(loc="upper right", fontsize=8)
    ax[3].legend(loc="upper right", fontsize=8)
    fig.suptitle("Online payload estimate during a pick-and-place (no sampling motion): estimate and σ, the "
                 "monitor's threshold, a push and a drop", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fmt(v, spec: str, unit: str = "") -> str:
    return "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:{spec}}{unit}"


def _span(v: list[float] | None) -> str:
    return "-" if v is None else f"{v[0]:.3f}" if v[0] == v[1] else f"{v[0]:.3f}-{v[1]:.3f}"


def _row(label: str, x: dict | None, truth_m: float, truth_c) -> tuple:
    if x is None:
        return (label, "-", "no estimate", "")
    return (label, f"{truth_m:.3f} kg, {np.round(1e3 * truth_c, 1).tolist()} mm",
            f"{x['mass']:.3f} ± {x['std_mass']:.3f} kg, {x['com_mm']} ± {x['std_com_mm']} mm",
            f"{x['mass_error_pct']:+.2f} %, |CoM error| {x['com_error_norm_mm']:.1f} mm, "
            f"{'within' if x['within_k_sigma'] else 'NOT within'} {K_SIGMA:g} σ")


def _report(res: dict, desc, sc: OnlineScenario, out: Path) -> dict:
    from ..model import RigidBodyDynamics
    from ..reporting import results_table

    _say("online 6/7", "scoring and plotting")
    res["sigma_thresholds"] = sigma_thresholds(res, RigidBodyDynamics(desc))
    o = outcomes(res, sc)
    ok, fails = verdict(o)
    png = plot_online(out / "online_estimate.png", res, sc, o)
    c, d = o["contact"], o["drop"]
    rows = [
        _row(f"estimate, first during move 1 ({_fmt(o['first'] and o['first']['t'], '.2f', ' s')})", o["first"],
             sc.payload_mass, sc.payload_com),
        _row("estimate 1.0 s after the move started", o["at_1s"], sc.payload_mass, sc.payload_com),
        _row("estimate at the end of move 1", o["end_move1"], sc.payload_mass, sc.payload_com),
        _row("estimate at the end of move 2 (after the push)", o["end_move2"], sc.payload_mass, sc.payload_com),
        ("threshold scale, widest joint (from the σ): first estimate / move 1 / end of move 1 / after the push / "
         "after the drop", "1 = unwidened", " / ".join(_span(v) for v in o["sigma_scale"].values()),
         f"x {max(o['thresholds']):g} N m; the node's status reported up to {_fmt(o['status_scale_max_move1'], '.3f')}"
         f" in move 1, {_fmt(o['status_scale_after_drop'], '.3f')} after the drop"),
        (f"push during move 2 at {c['t']:.2f} s", f"{c['link']} {c['force_N']:.0f} N",
         f"collision, flag after {_fmt(c['flag_delay_ms'], '.0f', ' ms')} (detected "
         f"{_fmt(c['detection_delay_ms'], '.0f', ' ms')})" if np.isfinite(c["flag_delay_ms"]) else "NOT detected",
         f"monitor: {c['node_answer'] or '-'}" + (f"; taken for a loss {c['taken_for_loss']}x"
                                                  if c["taken_for_loss"] else "")),
        (f"drop during move 3 at {d['t']:.2f} s", f"{sc.payload_mass:.2f} kg",
         f"payload lost after {_fmt(d['verdict_delay_ms'], '.0f', ' ms')} (detected "
         f"{_fmt(d['detection_delay_ms'], '.0f', ' ms')}), lost {_fmt(d['lost_mass'], '.2f', ' kg')}"
         if d["reported_lost"] else "NOT reported lost",
         f"collision flags {d['collision_flags']}; "
         f"estimate 0 kg after {_fmt(d['estimate_zero_after_ms'], '.0f', ' ms')}"
         f"; arm reached the place pose within {_fmt(d['arm_reached_place_deg'], '.2f', ' deg')}"),
        ("false alarms (collision flags outside the push)", 0, o["false_alarms"], ""),
    ]
    table = results_table(rows)
    summary = {"robot": desc.name, "truth": {"mass": sc.payload_mass, "com": sc.payload_com.tolist()},
               **o, "wall_time_s": res["wall_time_s"], "plot": str(png), "ok": ok, "failed": fails}
    (out / "online_summary.json").write_text(json.dumps(summary, indent=2, default=float))
    _say("online 7/7", f"results ({desc.name}, {res['wall_time_s']:.0f} s wall):")
    print(table)
    for f in fails:
        print(f"[demo online] FAILED: {f}", file=sys.stderr)
    print(f"\nplot: {png}\nsummary: {out / 'online_summary.json'}")
    return summary
