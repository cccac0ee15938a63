"""The sampling run around the user's pick configuration: pose sets, the unloaded sweep, the payload
excitation, the run's state machines, and the bare run (the three nodes' logic on the MuJoCo arm, no ROS).

Naming: ``plan_*`` returns a plan the run visits; :class:`SamplingRun` is one run, :class:`Sampler` the
sampler node's core around the runs (the node translates).
The bare run is ``sampling.bare_run.bare_run`` (the function shares its module's name).
"""

from importlib import import_module

# module -> the names it gives this folder's API (imported on first use: the planners pull in pinocchio
# and scipy, the bare run MuJoCo)
_API = {
    "poses": ("MotionLimitError", "PosePlan", "PosePlanConfig", "move_duration", "plan_poses", "stop_point"),
    "sweep": ("plan_sweep",),
    "payload_excitation": ("ExcitationPlan", "ExcitationPlanConfig", "UnsafeExcitation", "plan_payload_excitation"),
    "sequence": ("Capture", "Done", "Estimate", "Move", "PhaseTimings", "SamplingSequence", "SequenceAborted",
                 "SequenceConfig"),
    "sampling_run": ("RunConfig", "RunMode", "RunRefused", "RunSpec", "SamplingRun"),
    "sampler": ("Sampler", "SamplerRefused", "run_spec"),
    "bare_run": ("BareRunConfig", "BareRunResult"),
}
_MODULE = {name: module for module, names in _API.items() for name in names}
__all__ = sorted(_MODULE)


def __getattr__(name: str) -> object:
    """Import an API name from its module on first use (PEP 562): importing one module of the folder
    loads only what that module needs."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_MODULE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
