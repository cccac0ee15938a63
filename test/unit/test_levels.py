"""Status levels are one enum (payload_estimation.levels) whose values are diagnostic_msgs' bytes on the wire."""

from diagnostic_msgs.msg import DiagnosticStatus

from payload_estimation import levels
from payload_estimation.collision import supervisor
from payload_estimation.levels import ERROR, OK, WARN, Level
from payload_estimation.payload import estimator
from payload_estimation.sampling import sampler


def test_levels_are_the_diagnostic_bytes():
    assert [bytes([x]) for x in (OK, WARN, ERROR)] == [DiagnosticStatus.OK, DiagnosticStatus.WARN,
                                                        DiagnosticStatus.ERROR]
    assert max(OK, ERROR, WARN) is Level.ERROR and f"{WARN}" == "1"  # ordered; formatted as the number


def test_every_core_reports_the_same_levels():
    for module in (supervisor, estimator, sampler):
        assert (module.OK, module.WARN, module.ERROR) == (levels.OK, levels.WARN, levels.ERROR)
        assert all(isinstance(x, Level) for x in (module.OK, module.WARN, module.ERROR)), module.__name__
