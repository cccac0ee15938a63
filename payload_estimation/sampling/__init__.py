"""The sampling run around the user's pick configuration: pose sets, the unloaded sweep, the payload
excitation, the run's state machines, and the bare run (the three nodes' logic on the MuJoCo arm, no ROS).

Naming: ``plan_*`` returns a plan the run visits; :class:`SamplingRun` is one run, :class:`Sampler` the
sampler node's core around the runs (the node translates).
The bare run is ``sampling.bare_run.bare_run`` (the function shares its module's name).
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: the planners pull in pinocchio
# and scipy, the bare run MuJoCo)
_API = {
    "poses": ("MotionLimitError", "PosePlan", "PosePlanConfig", "move_duration", "plan_poses", "stop_point"),
    "sweep": ("plan_sweep",),
    "payload_excitation": ("ExcitationPlan", "ExcitationPlanConfig", "UnsafeExcitation", "plan_payload_excitation"),
    "sequence": ("Capture", "Done", "Estimate", "Move", "PhaseTimings", "SamplingSequence", "SequenceAborted",
                 "SequenceConfig"),
    "sampling_run": ("RunConfig", "RunMode", "RunRefused", "RunSpec", "SamplingRun"),
    "sampler": ("RETRIED_NOTE", "Sampler", "SamplerConfig", "SamplerRefused", "run_spec"),
    "bare_run": ("BareRunConfig", "BareRunResult"),
}
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
