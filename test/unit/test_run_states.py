"""The sampling run's transition table (sampling.run_states): every transition a run makes is in the table, and
the scenarios below make every transition of the table (no row the run cannot reach).

The runs are those of test_sampling_run (a kinematic arm, the estimator answering at once), recorded by a
SamplingRun whose ``_go`` notes each transition before it is checked against the table.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sampling_run import Q0, SPEC, KinematicArm, drive, start

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.run_planning import PlannedMotion
from payload_estimation.sampling.run_states import TRANSITIONS, Outcome, Phase, check_transition
from payload_estimation.sampling.sampling_run import Finished, SamplingRun

SEEN: set[tuple[Phase, Phase]] = set()
"""Every transition the scenarios made (module-wide: the last test compares it with the table)."""


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


class RecordedRun(SamplingRun):
    """A SamplingRun that notes its transitions; ``no_plan``: planning finds nothing (the run ends in PLANNING)."""

    def __init__(self, *args, no_plan: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.path: list[tuple[Phase, Phase]] = []
        self.no_plan = no_plan

    def _go(self, phase: Phase) -> None:
        self.path.append((self.phase, phase))
        SEEN.add((self.phase, phase))
        super()._go(phase)

    def planned(self, result: PlannedMotion) -> None:
        super().planned(PlannedMotion(None, error="nothing to plan here") if self.no_plan else result)


def anchored(dyn, sag_deg: float = 0.9) -> tuple[RecordedRun, KinematicArm, float]:
    """A run after a cancelled one, with the arm ``sag_deg`` off that run's pick configuration."""
    arm = KinematicArm(Q0)
    fin, t = drive(start(dyn, Q0), arm, 0.0, fault={"cancel_at": 0.9})
    arm.q = fin.anchor.q0 + np.radians(sag_deg) * np.array([0.0, 1.0, 0.0, -0.7, 0.0, 0.5, 0.0])
    return RecordedRun(dyn, SPEC, t, t, fin.anchor), arm, t


def phases(run: RecordedRun) -> list[str]:
    return [run.path[0][0].value, *(new.value for _, new in run.path)]


FRESH = [
    ({}, "waiting startup rest planning sequence done", "done"),
    ({"cancel_at": 0.9}, "waiting startup rest planning sequence abort_return done", "cancelled"),
    ({"collision_at": 0.9}, "waiting startup rest planning sequence done", "collision"),
    ({"monitor_ready_at": 1e9}, "waiting done", "refused"),
]
AFTER_ABORT = [
    ({"grasp_until": 0.4}, "waiting clear_first return_first startup rest planning sequence done", "done"),
    ({"grasp_until": 1e9}, "waiting clear_first done", "gate"),
    ({}, "waiting return_first startup rest planning sequence done", "done"),
    ({"block_at": 0.0}, "waiting return_first done", "not_reached"),
]


@pytest.mark.parametrize("fault,path,code", FRESH)
def test_a_fresh_run_goes_through_the_table(dyn, fault, path, code):
    run = RecordedRun(dyn, SPEC, 0.0, 0.0)
    fin, _ = drive(run, KinematicArm(Q0), 0.0, fault=fault)
    assert fin.code == code and phases(run) == path.split(), (fin.text, phases(run))
    assert isinstance(fin.code, Outcome) and fin.code == code  # the enum is the word a program reads


def test_a_run_that_moved_at_start_or_found_no_plan_ends_where_it_was(dyn):
    arm = KinematicArm(Q0)
    run = RecordedRun(dyn, SPEC, 0.0, 0.0)
    arm.command(Q0 + np.radians(3.0), 0.3, 0.0)  # someone else moves the arm after the request
    fin, _ = drive(run, arm, 0.0)
    assert fin.code == Outcome.MOVED_AT_START and phases(run)[-2:] == ["rest", "done"]
    run = RecordedRun(dyn, SPEC, 0.0, 0.0, no_plan=True)
    fin, _ = drive(run, KinematicArm(Q0), 0.0)
    assert fin.code == Outcome.PLAN_FAILED and "nothing to plan here" in fin.text
    assert phases(run)[-2:] == ["planning", "done"]


@pytest.mark.parametrize("fault,path,code", AFTER_ABORT)
def test_a_run_after_an_abort_returns_first_through_the_table(dyn, fault, path, code):
    run, arm, t = anchored(dyn)
    fin, _ = drive(run, arm, t, fault=fault)
    assert fin.code == code and phases(run) == path.split(), (fin.text, phases(run))


def test_a_transition_outside_the_table_is_a_bug():
    with pytest.raises(RuntimeError, match="no transition done -> waiting"):
        check_transition(Phase.DONE, Phase.WAITING)
    with pytest.raises(RuntimeError, match="sequence -> planning"):
        check_transition(Phase.SEQUENCE, Phase.PLANNING)


def test_every_phase_but_done_has_a_handler_and_a_way_out():
    assert set(SamplingRun._HANDLERS) == set(Phase) - {Phase.DONE}
    assert all(TRANSITIONS[p] for p in Phase if p is not Phase.DONE) and not TRANSITIONS[Phase.DONE]
    assert Finished(False, "x", code="stream_lost").code is Outcome.STREAM_LOST
    with pytest.raises(ValueError):
        Finished(False, "x", code="no such outcome")


def test_the_scenarios_made_every_transition_of_the_table(dyn):
    """The table has no transition that no scenario makes (the scenarios above, run again here: this test does not
    depend on the others having run first)."""
    SEEN.clear()
    for fault, _, _ in FRESH:
        drive(RecordedRun(dyn, SPEC, 0.0, 0.0), KinematicArm(Q0), 0.0, fault=fault)
    for fault, _, _ in AFTER_ABORT:
        run, arm, t = anchored(dyn)
        drive(run, arm, t, fault=fault)
    moved = KinematicArm(Q0)
    moved.command(Q0 + np.radians(3.0), 0.3, 0.0)
    drive(RecordedRun(dyn, SPEC, 0.0, 0.0), moved, 0.0)
    drive(RecordedRun(dyn, SPEC, 0.0, 0.0, no_plan=True), KinematicArm(Q0), 0.0)
    table = {(a, b) for a, bs in TRANSITIONS.items() for b in bs}
    assert SEEN <= table
    assert table - SEEN == set(), f"never made: {sorted((a.value, b.value) for a, b in table - SEEN)}"
