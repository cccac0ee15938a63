"""``bringup``: start the package's nodes without the ROS CLI (demo, tests, robots without launch).

    bringup --robot lwr4 --nodes sim,estimator,sampler,monitor [--processes] [--namespace /arm]
            [--params-file config/lwr4.yaml] [--use-sim-time] [-r from:=to ...] [-p node.key:=value ...]

In-process (default) every node runs in one MultiThreadedExecutor; with ``--processes`` each node
is a child process (``python -m payload_estimation.ros.<module> --ros-args ...``), so one crashing
node does not take the others down. Both modes read the same parameter file
(default: the package's ``config/<robot>.yaml``) and take the same remaps.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

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
        raise ValueError(f"unknown node {short!r}; choose from {', '.join(NODES)}")
    module, names = NODES[short]
    mod = importlib.import_module(module)
    for name in names:
        if hasattr(mod, name):
            return getattr(mod, name)
    raise ValueError(f"{module} defines none of {names}")


def config_file(robot: str) -> Path | None:
    """The package parameter file for ``robot`` (source tree or installed share), or None."""
    from ..model.robot_file import share_dir

    for base in (Path(__file__).resolve().parents[2] / "config", share_dir() / "config"):
        f = base / f"{Path(robot).stem}.yaml"
        if f.is_file():
            return f
    return None


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


def launch_entries(robot: str = "lwr4", nodes: Sequence[str] = ("estimator", "sampler", "monitor"),
                   namespace: str = "", use_sim_time: bool = False, params_file: str | Path | None = None,
                   joint_states: str = "", joint_trajectory: str = "", extra_params: dict | None = None,
                   monitor_prefix: str = "") -> list[dict]:
    """What the launch files start, as plain data (testable without the launch package).

    One dict per node: ``executable``, ``name``, ``namespace``, ``parameters`` (list: the
    parameter file path, then a dict of overrides) and ``remappings`` (list of (from, to)).
    ``joint_states`` / ``joint_trajectory``: absolute or relative topic names to remap the package's
    ``joint_states`` / ``joint_trajectory`` to (empty = unchanged), e.g.
    ``/lbr/joint_trajectory_controller/joint_trajectory``. ``monitor_prefix``: a command to run the
    collision monitor under (the launch ``prefix``), e.g. ``chrt -f 80`` for real-time priority.
    """
    pfile = str(params_file) if params_file else (str(config_file(robot)) if config_file(robot) else None)
    overrides = {"robot": robot, "use_sim_time": bool(use_sim_time), **(extra_params or {})}
    remaps = []
    if joint_states:
        remaps.append(("joint_states", joint_states))
    if joint_trajectory:
        remaps.append(("joint_trajectory", joint_trajectory))
    out = []
    for short in nodes:
        if short not in EXECUTABLES:
            raise ValueError(f"unknown node {short!r}; choose from {', '.join(EXECUTABLES)}")
        params = ([pfile] if pfile and short != "sim" else []) + [
            {k: v for k, v in overrides.items() if not (short == "sim" and k == "use_sim_time")}]
        out.append({"executable": EXECUTABLES[short], "name": EXECUTABLES[short], "namespace": namespace,
                    "parameters": params, "remappings": list(remaps)})
        if short == "monitor" and monitor_prefix.strip():
            out[-1]["prefix"] = monitor_prefix.strip()
    return out


def spin_nodes(nodes: Sequence[Node], threads: int | None = None) -> None:
    """Spin ``nodes`` until shutdown or Ctrl-C, then destroy them.

    A MultiThreadedExecutor when several nodes share the process or a node declares
    ``needs_multithreaded_executor`` (the sampler waits inside a service callback), otherwise the
    cheaper SingleThreadedExecutor (the monitor's 1 kHz path).
    """
    if len(nodes) > 1 or any(getattr(n, "needs_multithreaded_executor", False) for n in nodes):
        executor = MultiThreadedExecutor(num_threads=threads or max(4, 2 * len(nodes)))
    else:
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
        executor.shutdown()
        for n in nodes:
            n.destroy_node()


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


def run_node(node_cls: type[Node], args: Sequence[str] | None = None) -> int:
    """Console-script body of a node: init rclpy with ``args``, spin one ``node_cls()``, shut down."""
    rclpy.init(args=args)
    try:
        node = node_cls()
        tune_interpreter()
        spin_nodes([node])
    finally:
        if rclpy.ok():
            rclpy.shutdown()
    return 0


def start_processes(short_names: Sequence[str], args: list[str], env=None,
                    prefix: Sequence[str] = ()) -> list[subprocess.Popen]:
    """Start each node as ``[*prefix] python -m <module> <args>``; returns the child processes.

    ``prefix``: a command to run the node under, e.g. ``("chrt", "-f", "10")`` for real-time priority.
    """
    procs = []
    for short in short_names:
        if short not in NODES:
            raise ValueError(f"unknown node {short!r}; choose from {', '.join(NODES)}")
        procs.append(subprocess.Popen([*prefix, sys.executable, "-m", NODES[short][0], *args], env=env))
    return procs


def stop_processes(procs: Sequence[subprocess.Popen], timeout: float = 5.0) -> None:
    """SIGINT, then SIGKILL after ``timeout`` seconds, for each child."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bringup", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="lwr4", help="robot name or file (selects config/<robot>.yaml)")
    ap.add_argument("--nodes", default="sim,estimator,sampler,monitor",
                    help=f"comma-separated subset of {','.join(NODES)}")
    ap.add_argument("--params-file", default=None, help="ROS parameter file (default: config/<robot>.yaml)")
    ap.add_argument("--namespace", default=None, help="namespace for every node, e.g. /lbr")
    ap.add_argument("--use-sim-time", action="store_true", help="set use_sim_time:=true on every node")
    ap.add_argument("--processes", action="store_true", help="one child process per node")
    ap.add_argument("--monitor-prefix", default="",
                    help="with --processes: command to run the monitor under, e.g. 'chrt -f 80' (real-time priority)")
    ap.add_argument("-r", "--remap", action="append", default=[], help="remap rule from:=to (repeatable)")
    ap.add_argument("-p", "--param", action="append", default=[], help="parameter name:=value for every node")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    short = [s.strip() for s in a.nodes.split(",") if s.strip()]
    for s in short:
        if s not in NODES:
            print(f"bringup: unknown node {s!r}; choose from {', '.join(NODES)}", file=sys.stderr)
            return 2
    pfile = a.params_file or config_file(a.robot)
    params = list(a.param)
    if not any(p.startswith("robot:=") for p in params):
        params.append(f"robot:={a.robot}")
    args = ros_args(pfile, a.namespace, True if a.use_sim_time else None, a.remap, params)
    if a.monitor_prefix and not a.processes:
        print("bringup: --monitor-prefix needs --processes (the monitor is its own process then)", file=sys.stderr)
        return 2
    if a.processes:
        prefix = a.monitor_prefix.split()
        procs = [start_processes([s], args, prefix=prefix if s == "monitor" else ())[0] for s in short]
        try:
            while all(p.poll() is None for p in procs):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            stop_processes(procs)
        return max((p.returncode or 0) for p in procs)
    rclpy.init(args=["bringup", *args])
    try:
        nodes = [node_class(s)() for s in short]
        tune_interpreter()
        spin_nodes(nodes)
    finally:
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
