"""``bringup``: start the package's nodes without the ROS CLI (demo, tests, robots without launch).

    bringup --robot lwr4 --nodes sim,estimator,sampler,monitor [--processes] [--namespace /arm]
            [--model-from-topic] [--params-file FILE] [--use-sim-time] [-r from:=to ...] [-p key:=value ...]

In-process (default) every node runs in one SingleThreadedExecutor; with ``--processes`` each node
is a child process (``python -m payload_estimation.ros.<module> --ros-args ...``), so one crashing
node does not take the others down; bringup stops every child on SIGINT, SIGTERM and SIGHUP (and
the children stop themselves if bringup dies), and reports a child that exits with its exit code.
Both modes read the same parameter file (default: the package's ``config/payload_estimation.yaml``)
and take the same remaps. ``-p name:=value`` overrides win over every parameter file: they are
written to a file of node-specific entries that comes last (in rcl the order of node-name entries
decides, and a file's node-specific entry would otherwise outrank a later global ``-p``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import rclpy
import yaml
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from ..errors import PayloadEstimationError
from ..model.robot_file import load_robot


class BringupError(PayloadEstimationError):
    """A node name or parameter override bringup cannot use; the message says what is allowed."""


NODES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sim": ("payload_estimation.ros.sim_node", ("SimNode", "SimArmNode", "SimulatedArmNode")),
    "estimator": ("payload_estimation.ros.estimator_node", ("PayloadEstimatorNode",)),
    "sampler": ("payload_estimation.ros.sampler_node", ("PayloadSamplerNode",)),
    "monitor": ("payload_estimation.ros.monitor_node", ("CollisionMonitorNode",)),
}
"""Short name -> (module, candidate node class names)."""


def node_class(short: str) -> type[Node]:
    """The Node subclass behind a short name (``sim``, ``estimator``, ``sampler``, ``monitor``)."""
    if short not in NODES:
        raise BringupError(f"unknown node {short!r}; choose from {', '.join(NODES)}")
    module, names = NODES[short]
    mod = importlib.import_module(module)
    for name in names:
        if hasattr(mod, name):
            return getattr(mod, name)
    raise ValueError(f"{module} defines none of {names}")


PARAMS_FILE = "payload_estimation.yaml"
"""The package's parameter file (config/; every key under ``/**`` so any override outranks it)."""


def config_file(robot: str = "") -> Path | None:
    """The package parameter file (source tree or installed share), or None.

    ``robot`` is accepted for callers that name one: the file holds no robot-specific values.
    """
    from ..model import share_dir

    for base in (Path(__file__).resolve().parents[2] / "config", share_dir() / "config"):
        f = base / PARAMS_FILE
        if f.is_file():
            return f
    return None


def override_file(params: Sequence[str], nodes: Sequence[str] = tuple(NODES), directory: str | None = None,
                  extra: dict[str, dict] | None = None) -> Path:
    """A parameter file giving each ``name:=value`` (value parsed as YAML, like ``-p``) to every node in
    ``nodes`` by its node-specific entry; passed last, it outranks the files before it. ``extra``: short
    node name -> {name: value} for that node only (after the shared values)."""
    values = {}
    for p in params:
        if ":=" not in p:
            raise BringupError(f"parameter override {p!r} must look like name:=value")
        k, v = p.split(":=", 1)
        values[k.strip()] = yaml.safe_load(v) if v.strip() else ""
    doc = {f"/**/{EXECUTABLES_NODE[s]}": {"ros__parameters": dict(values)} for s in nodes}
    for s, more in (extra or {}).items():
        doc[f"/**/{EXECUTABLES_NODE[s]}"] = {"ros__parameters": {**values, **more}}
    fd, path = tempfile.mkstemp(prefix="payload_estimation_overrides_", suffix=".yaml", dir=directory)
    with os.fdopen(fd, "w") as f:
        yaml.dump(doc, f, Dumper=_NoAliasDumper)
    return Path(path)


class _NoAliasDumper(yaml.SafeDumper):
    """Writes shared values out in full: rcl refuses YAML aliases ("Will not support aliasing")."""

    def ignore_aliases(self, data) -> bool:
        return True


def ros_args(params_file: str | Path | None = None, namespace: str | None = None, use_sim_time: bool | None = None,
             remaps: Sequence[str] = (), params: Sequence[str] = ()) -> list[str]:
    """The ``--ros-args ...`` list shared by both modes (global to all nodes of a process)."""
    args = ["--ros-args"]
    if params_file:
        args += ["--params-file", str(params_file)]
    if namespace:
        args += ["-r", f"__ns:={namespace if namespace.startswith('/') else '/' + namespace}"]
    if use_sim_time is not None:
        args += ["-p", f"use_sim_time:={'true' if use_sim_time else 'false'}"]
    for r in remaps:
        args += ["-r", r]
    for p in params:
        args += ["-p", p]
    return args


EXECUTABLES = {"sim": "sim_node", "estimator": "payload_estimator", "sampler": "payload_sampler",
               "monitor": "collision_monitor"}
"""Short name -> console script (the launch files' ``executable``)."""

EXECUTABLES_NODE = EXECUTABLES
"""Short name -> node name (each console script's node has the script's name)."""


PARAMETER_FILE_FORM = ("a ROS 2 parameter file maps node names to their ros__parameters, e.g. "
                       "'/**/payload_sampler: {ros__parameters: {amplitude_deg: 5.0}}'")


def parameter_file(path: str | Path, what: str = "parameter file") -> tuple[Path, dict]:
    """(``path``, its node sections) checked to be a ROS 2 parameter file rcl can read; raises :class:`BringupError`
    saying what is wrong in words before any node starts (rcl would raise its parse error from every node)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise BringupError(f"{what} {p}: " + ("is a directory" if p.is_dir() else "no such file"))
    try:
        doc = yaml.safe_load(p.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise BringupError(f"{what} {p}: cannot be read ({e.strerror if isinstance(e, OSError) else e})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        raise BringupError(f"{what} {p}: not valid YAML{at} ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(doc, dict) or not doc:
        raise BringupError(f"{what} {p}: {'empty' if not doc else 'not a mapping of node names'}; "
                           f"{PARAMETER_FILE_FORM}")
    for node, body in doc.items():
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            raise BringupError(f"{what} {p}: the section {node!r} has no 'ros__parameters' mapping; "
                               f"{PARAMETER_FILE_FORM}")
    return p, doc


def thresholds_file(path: str | Path, joints: int | None = None) -> Path:
    """``path``, checked to be a parameter file giving ``collision_monitor`` its ``thresholds`` (what
    ``~/finish_threshold_calibration`` and ``payload-estimation residual --calibrate --params-out`` write) that the
    node's own parameter check accepts (for an arm of ``joints`` joints when known: one value or one per joint);
    raises :class:`BringupError` saying what is wrong before any node starts (rcl would only say it cannot parse
    it)."""
    from .monitor_params import PARAMS, per_joint_problem

    how = ("write one with collision_monitor's threshold_calibration_file and ~/finish_threshold_calibration, or with "
           "payload-estimation residual --calibrate --params-out")
    try:
        p, nodes = parameter_file(path, "thresholds file")
    except BringupError as e:
        raise BringupError(f"{e}; {how}") from None
    params = next((v["ros__parameters"] for k, v in nodes.items() if str(k).endswith("collision_monitor")), None)
    if params is None or "thresholds" not in params:
        raise BringupError(f"thresholds file {p}: no collision_monitor: ros__parameters: thresholds in it; {how}")
    spec = PARAMS.by_name["thresholds"]
    value = spec.coerce(params["thresholds"])
    err = spec.type_problem(value) or spec.check(value)
    if not err and joints is not None:
        err = per_joint_problem("thresholds", value, joints)
    if err:
        raise BringupError(f"thresholds file {p}: {err}")
    return p


def robot_joints(robot: str) -> int | None:
    """The joint count of ``robot`` (a shipped name or a file), None when it is not given or does not load (the
    nodes then say why)."""
    if not robot:
        return None
    try:
        return load_robot(robot).n
    except Exception:  # noqa: BLE001 -- the nodes report a robot that does not load
        return None


def launch_entries(robot: str = "", nodes: Sequence[str] = ("estimator", "sampler", "monitor"),
                   namespace: str = "", use_sim_time: bool = False, params_file: str | Path | None = None,
                   joint_states: str = "", joint_trajectory: str = "", extra_params: dict | None = None,
                   monitor_prefix: str = "", model_from_topic: bool = False,
                   thresholds: str | Path | None = None) -> list[dict]:
    """What the launch files start, as plain data (testable without the launch package).

    One dict per node: ``executable``, ``name``, ``namespace``, ``parameters`` (list: the
    parameter file path, then a dict of overrides) and ``remappings`` (list of (from, to)).
    ``robot``: a shipped robot or file; empty (the default for real robots) = every node takes the URDF
    from ``robot_description`` in its namespace, as robot_state_publisher publishes it.
    ``model_from_topic``: the simulator gets ``robot`` (and publishes its description) while the other
    nodes take their model from the topic, as they would on the real robot.
    ``joint_states`` / ``joint_trajectory``: absolute or relative topic names to remap the package's
    ``joint_states`` / ``joint_trajectory`` to (empty = unchanged), e.g.
    ``/lbr/joint_trajectory_controller/joint_trajectory``. ``monitor_prefix``: a command to run the
    collision monitor under (the launch ``prefix``), e.g. ``chrt -f 80`` for real-time priority.
    ``thresholds``: a calibrated thresholds file (:func:`thresholds_file`) layered over the parameter file for the
    collision monitor, so the package's file stays as it is.
    """
    pfile = str(parameter_file(params_file)[0]) if params_file else (str(config_file(robot)) if config_file(robot)
                                                                      else None)
    tfile = str(thresholds_file(thresholds, robot_joints(robot))) if thresholds else None
    overrides = {"robot": robot, "use_sim_time": bool(use_sim_time), **(extra_params or {})}
    bad = [k for k, v in overrides.items() if isinstance(v, str) and ":=" in v]
    if bad:
        raise BringupError(f"launch parameter values must not contain ':=': {bad}")
    remaps = []
    if joint_states:
        remaps.append(("joint_states", joint_states))
    if joint_trajectory:
        remaps.append(("joint_trajectory", joint_trajectory))
    out = []
    for short in nodes:
        if short not in EXECUTABLES:
            raise BringupError(f"unknown node {short!r}; choose from {', '.join(EXECUTABLES)}")
        mine = {k: v for k, v in overrides.items() if not (short == "sim" and k == "use_sim_time")}
        if model_from_topic and short != "sim":
            mine["robot"] = ""
        params = ([pfile] if pfile and short != "sim" else []) + ([tfile] if tfile and short == "monitor" else [])
        params.append(mine)
        out.append({"executable": EXECUTABLES[short], "name": EXECUTABLES[short], "namespace": namespace,
                    "parameters": params, "remappings": list(remaps)})
        if short == "monitor" and monitor_prefix.strip():
            out[-1]["prefix"] = monitor_prefix.strip()
    return out


def spin_nodes(nodes: Sequence[Node], threads: int | None = None) -> None:
    """Spin ``nodes`` in one SingleThreadedExecutor until shutdown, Ctrl-C or SIGTERM, then destroy them.

    Single-threaded on purpose: no node blocks in a callback (the sampler's ``~/sample`` awaits its run),
    and rclpy's MultiThreadedExecutor re-submits tasks its pool has not started yet in a busy loop that
    starved a 1 kHz stream here (docs/ros_interface.md, "Executors").
    """
    executor = SingleThreadedExecutor()
    for n in nodes:
        executor.add_node(n)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        # rclpy may fail to take a message that arrives while SIGINT shuts the context down;
        # that is a normal exit, anything while the context stays valid is not.
        time.sleep(0.2)
        if nodes[0].context.ok():
            raise
    finally:
        with _signals_ignored():  # a supervisor's second signal must not cut the clean-up short
            executor.shutdown()
            for n in nodes:
                n.destroy_node()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_ignored():
    """Ignore SIGINT/SIGTERM/SIGHUP inside the block (main thread only: elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


GIL_SWITCH_INTERVAL = 5e-4
"""s; Python's default is 5 ms."""


def tune_interpreter() -> None:
    """Interpreter settings for nodes that serve 1 kHz streams; call once the nodes are constructed.

    - ``gc.freeze()``: start-up leaves ~40 000 long-lived objects (numpy, pinocchio, the model); a
      full collection over them pauses the interpreter for 10-40 ms, which the 1 kHz monitor would
      see as latency spikes. Objects created later are still collected as usual.
    - GIL switch interval 0.5 ms instead of 5 ms: threads of one process (executor threads, the
      monitor's joint_states thread, the simulator's physics thread) take turns at most 0.5 ms late.
      With the default the simulator ran at 0.2-0.5 x real time next to busy nodes (docs/bench/sampler.md).
    """
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)


def debug_logging(args: Sequence[str] | None) -> bool:
    """True if ``--ros-args --log-level debug`` (or ``name:=debug``) is among ``args``."""
    a = list(sys.argv if args is None else args)
    return any(x == "--log-level" and i + 1 < len(a) and a[i + 1].lower().endswith("debug")
               for i, x in enumerate(a))


def construct(node_classes: Sequence[type[Node]], args: Sequence[str] | None) -> list[Node] | None:
    """Construct the nodes; on a start-up failure print one line (the traceback only with
    ``--log-level debug``), destroy what was built and return None."""
    nodes: list[Node] = []
    try:
        for cls in node_classes:
            nodes.append(cls())
    except Exception as e:  # noqa: BLE001 - a start-up failure is reported, not raised
        name = getattr(cls, "node_name", None) or cls.__name__
        print(f"[{name}] cannot start: {e}", file=sys.stderr, flush=True)
        if debug_logging(args):
            import traceback

            traceback.print_exc()
        for n in nodes:
            n.destroy_node()
        return None
    return nodes


def run_node(node_cls: type[Node], args: Sequence[str] | None = None) -> int:
    """Console-script body of a node: init rclpy with ``args``, spin one ``node_cls()``, shut down.

    Exit code 1 (after one line on stderr) when the node cannot start."""
    rclpy.init(args=args)
    try:
        nodes = construct([node_cls], args)
        if nodes is None:
            return 1
        tune_interpreter()
        spin_nodes(nodes)
    finally:
        if rclpy.ok():
            rclpy.shutdown()
    return 0


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG), and SIGINT at its default
    (bringup started with ``&`` from a script inherits SIGINT ignored, and so would its children: Python then never
    turns SIGINT into KeyboardInterrupt, and bringup's SIGINT to them would wait for the SIGKILL)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except Exception:  # noqa: BLE001 - not Linux: supervise() still stops the children on a signal
        pass


def start_processes(short_names: Sequence[str], args: list[str], env=None,
                    prefix: Sequence[str] = ()) -> list[subprocess.Popen]:
    """Start each node as ``[*prefix] python -m <module> <args>``; returns the child processes.

    ``prefix``: a command to run the node under, e.g. ``("chrt", "-f", "10")`` for real-time priority.
    The children get SIGTERM if this process dies (no orphans still publishing commands).
    """
    procs = []
    for short in short_names:
        if short not in NODES:
            raise BringupError(f"unknown node {short!r}; choose from {', '.join(NODES)}")
        p = subprocess.Popen([*prefix, sys.executable, "-m", NODES[short][0], *args], env=env,
                             preexec_fn=_die_with_parent)
        p.node = short
        procs.append(p)
    return procs


def stop_processes(procs: Sequence[subprocess.Popen], timeout: float = 3.0) -> None:
    """SIGINT, then SIGKILL after ``timeout`` seconds, for each child still running: the nodes that read the
    simulator's stream first, the simulator (``node`` "sim") once they are gone. Stopped together, the simulator
    went first and a collision monitor still shutting down on a busy machine logged its stream lost ("collision
    detection is blind") at ERROR."""
    sources = [p for p in procs if getattr(p, "node", None) == "sim"]
    for wave in ([p for p in procs if p not in sources], sources):
        for p in wave:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        for p in wave:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class _Stop(Exception):
    """A stop signal reached bringup."""


def _raise_stop(signum, frame) -> None:
    raise _Stop(signal.Signals(signum).name)


def supervise(procs: Sequence[subprocess.Popen], poll: float = 0.2) -> int:
    """Wait until a child exits or a stop signal (SIGINT, SIGTERM, SIGHUP) arrives, then stop all children.

    A child that exits on its own is reported with its exit code; returns the first non-zero code. The simulator
    stands in for the robot: when it exits, the package's nodes go on as they do when a robot driver stops (they
    report the stream lost, a pending ``~/sample`` answers with the reason); bringup says so and waits for them."""
    old = {s: signal.signal(s, _raise_stop) for s in STOP_SIGNALS}  # SIGINT too: it may be inherited ignored
    code = 0
    procs = list(procs)
    try:
        while procs:
            done = [p for p in procs if p.poll() is not None]
            if done and all(getattr(p, "node", "") == "sim" for p in done) and len(done) < len(procs):
                for p in done:
                    print(f"bringup: sim_node exited with code {p.returncode}; the other nodes go on without its "
                          "stream, as with a robot driver that stops (they report joint_states lost); stop them "
                          "with Ctrl-C", file=sys.stderr, flush=True)
                    procs.remove(p)
                code = code or next((p.returncode for p in done if p.returncode), 0)
                continue
            if done:
                for p in done:
                    print(f"bringup: {EXECUTABLES.get(getattr(p, 'node', ''), p.args)} exited with code "
                          f"{p.returncode}; stopping the other nodes", file=sys.stderr, flush=True)
                code = next((p.returncode for p in done if p.returncode), code)
                break
            time.sleep(poll)
    except (KeyboardInterrupt, _Stop) as e:
        print(f"bringup: {e or 'SIGINT'}: stopping the nodes", file=sys.stderr, flush=True)
    finally:
        with _signals_ignored():  # `timeout`, systemd and docker signal the whole group, some twice
            stop_processes(procs)
        for s, h in old.items():
            signal.signal(s, h)
    return code


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bringup", description=__doc__.split("\n\n")[0].replace("``", ""))
    ap.add_argument("--robot", default="lwr4", help="robot name or file; '' = from the robot_description topic")
    ap.add_argument("--model-from-topic", action="store_true",
                    help="the nodes other than sim take their model from robot_description (sim publishes it)")
    ap.add_argument("--nodes", default="sim,estimator,sampler,monitor",
                    help=f"comma-separated subset of {','.join(NODES)}")
    ap.add_argument("--params-file", default=None, help="ROS parameter file (default: config/payload_estimation.yaml)")
    ap.add_argument("--thresholds-file", default=None,
                    help="collision_monitor's calibrated thresholds (a parameter file), over --params-file")
    ap.add_argument("--namespace", default=None, help="namespace for every node, e.g. /lbr")
    ap.add_argument("--use-sim-time", action="store_true", help="set use_sim_time:=true on every node")
    ap.add_argument("--processes", action="store_true", help="one child process per node")
    ap.add_argument("--monitor-prefix", default="",
                    help="with --processes: command to run the monitor under, e.g. 'chrt -f 80' (real-time priority)")
    ap.add_argument("-r", "--remap", action="append", default=[], help="remap rule from:=to (repeatable)")
    ap.add_argument("-p", "--param", action="append", default=[],
                    help="parameter name:=value for every node (outranks every parameter file)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    short = [s.strip() for s in a.nodes.split(",") if s.strip()]
    for s in short:
        if s not in NODES:
            print(f"bringup: unknown node {s!r}; choose from {', '.join(NODES)}", file=sys.stderr)
            return 2
    if a.monitor_prefix and not a.processes:
        print("bringup: --monitor-prefix needs --processes (the monitor is its own process then)", file=sys.stderr)
        return 2
    params = list(a.param)
    if not any(p.startswith("robot:=") for p in params):
        params.append(f"robot:={a.robot}")
    try:
        pfile = parameter_file(a.params_file)[0] if a.params_file else config_file(a.robot)
        layers = [str(thresholds_file(a.thresholds_file, robot_joints(a.robot)))] if a.thresholds_file else []
        overrides = override_file(params, short)
        if a.model_from_topic:  # node-specific entries come last: they outrank the global robot:=
            overrides.unlink()
            overrides = override_file(params, ["sim"], extra={s: {"robot": ""} for s in short if s != "sim"})
    except (BringupError, yaml.YAMLError) as e:
        print(f"bringup: {e}", file=sys.stderr)
        return 2
    args = ros_args(pfile, a.namespace, True if a.use_sim_time else None, a.remap)
    for f in [*layers, str(overrides)]:
        args += ["--params-file", f]
    try:
        if a.processes:
            prefix = a.monitor_prefix.split()
            return supervise([start_processes([s], args, prefix=prefix if s == "monitor" else ())[0] for s in short])
        rclpy.init(args=["bringup", *args])
        old = {s: signal.signal(s, _raise_stop) for s in STOP_SIGNALS}  # SIGINT too: it may be inherited ignored
        try:
            nodes = construct([node_class(s) for s in short], args)
            if nodes is None:
                return 1
            tune_interpreter()
            spin_nodes(nodes)
        except _Stop:
            pass
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            if rclpy.ok():
                rclpy.shutdown()
        return 0
    finally:
        overrides.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
