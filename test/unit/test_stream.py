"""Stream health (payload_estimation.stream): stamp faults, restarts, loss on the wall clock."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.stream import StampGuard, StampVerdict, StreamWatchdog

A, H, R = StampVerdict.ACCEPT, StampVerdict.HOLD, StampVerdict.RESTART


def feed(guard, samples):
    return [guard.check(t, w) for t, w in samples]


def clean(t0=100.0, w0=0.0, n=50, dt=0.001):
    return [(t0 + k * dt, w0 + k * dt) for k in range(n)]


def test_a_clean_stream_is_accepted_including_backlogs_and_a_slow_clock():
    g = StampGuard(max_jump=1.0, confirm=5)
    assert set(feed(g, clean())) == {A}
    # a stalled consumer then a burst: wall time jumped, stamps did not: fine
    assert set(feed(g, [(100.05 + k * 1e-3, 2.0 + 1e-6 * k) for k in range(20)])) == {A}
    # sim time at half speed, or a bag played 10x faster: fine
    assert set(feed(g, [(100.1 + k * 5e-4, 2.1 + k * 1e-3) for k in range(100)])) == {A}
    assert set(feed(g, [(101.0 + k * 1e-2, 3.0 + k * 1e-3) for k in range(100)])) == {A}
    assert g.counters.held == g.counters.restarts == 0


def test_one_future_stamp_is_held_out_and_the_stream_goes_on():
    g = StampGuard(max_jump=1.0, confirm=5)
    feed(g, clean(n=10))
    assert g.check(1100.0, 0.0105) is H  # 1000 s ahead
    after = feed(g, [(100.011 + k * 1e-3, 0.011 + k * 1e-3) for k in range(20)])
    assert set(after) == {A}, "the samples after the bad one must not be dropped"
    assert g.counters.rejected == 1 and g.counters.restarts == 0 and "ahead" in g.counters.last_fault
    assert g.last_stamp == pytest.approx(100.030)


def test_one_past_stamp_and_duplicates_are_dropped():
    g = StampGuard(max_jump=1.0, confirm=5)
    feed(g, clean(n=10))
    assert g.check(50.0, 0.0105) is H
    assert g.check(100.009, 0.011) is H  # the previous sample again (a logger re-sending it)
    assert set(feed(g, [(100.010 + k * 1e-3, 0.012 + k * 1e-3) for k in range(5)])) == {A}
    assert g.counters.rejected == 2


def test_a_stream_that_starts_over_is_a_restart_after_confirm_samples():
    g = StampGuard(max_jump=1.0, confirm=5)
    feed(g, clean(t0=23.0, n=10))
    verdicts = feed(g, [(0.001 * k, 1.0 + 0.001 * k) for k in range(8)])  # /clock reset: stamps from 0
    assert verdicts[:4] == [H] * 4 and verdicts[4] is R and set(verdicts[5:]) == {A}
    assert g.counters.restarts == 1 and "restarted" in g.counters.last_fault
    assert g.last_stamp == pytest.approx(0.007)


def test_a_permanent_clock_step_forward_is_a_restart_too():
    g = StampGuard(max_jump=1.0, confirm=3)
    feed(g, clean(n=10))
    verdicts = feed(g, [(5000.0 + 0.001 * k, 0.02 + 0.001 * k) for k in range(4)])
    assert verdicts == [H, H, R, A]


def test_guard_arguments_are_checked():
    with pytest.raises(ValueError, match="max_jump"):
        StampGuard(max_jump=0.0)
    with pytest.raises(ValueError, match="confirm"):
        StampGuard(confirm=0)


def test_watchdog_counts_outages_on_the_wall_clock():
    w = StreamWatchdog(timeout=0.5)
    assert w.lost(0.0) and w.age(0.0) is None and w.losses == 0  # nothing yet: lost, but no outage
    assert not w.feed(1.0)
    assert not w.lost(1.4)
    assert w.lost(1.6) and w.losses == 1
    assert w.lost(5.0) and w.losses == 1  # the same outage
    assert w.feed(5.1) and not w.lost(5.2)
    assert w.lost(6.0) and w.losses == 2
    with pytest.raises(ValueError):
        StreamWatchdog(timeout=0.0)


def test_a_latched_topic_wait_says_why_and_subscribes_again_only_for_a_compatible_publisher():
    from payload_estimation.stream.latched_wait import LatchedWait, Publisher

    w = LatchedWait("/arm/robot_description", patience=2.0, max_patience=5.0)
    w.subscribed(10.0)
    again, text = w.check(20.0, [])
    assert not again and "no node publishes it yet" in text and "/arm/robot_description" in text
    # a volatile publisher never matches: subscribing again cannot help, the user must change it
    volatile = Publisher("my_publisher", reliable=True, transient_local=False)
    again, text = w.check(30.0, [volatile])
    assert not again and "my_publisher offers volatile durability" in text and "transient-local" in text
    assert not w.check(31.0, [Publisher("x", False, False)])[0]
    assert "best-effort reliability and volatile durability" in w.check(31.0, [Publisher("x", False, False)])[1]
    # a compatible publisher whose latched message has not come: again after 2 s, then 4, then at most 5
    rsp = Publisher("robot_state_publisher", True, True)
    w.subscribed(100.0)
    assert w.check(101.9, [rsp, volatile]) == (False, "waiting for the robot model on /arm/robot_description: "
                                                      "1 publisher(s)")
    times = [t for t in np.arange(102.0, 125.0, 0.5) if w.check(float(t), [rsp])[0]]
    assert times == [102.0, 106.0, 111.0, 116.0, 121.0] and w.resubscribed == 5
    assert "subscribed again 5 time(s)" in w.check(121.5, [rsp])[1]
    with pytest.raises(Exception, match="patience"):
        LatchedWait("/t", patience=3.0, max_patience=2.0)


def test_a_consumer_that_was_late_itself_does_not_call_the_stream_lost():
    """Issue 48: starved is not lost. The consumer's periodic check came 0.8 s late (its executor blocked): the
    stream's silence before counts not; a stream that stays silent while the consumer runs is lost after the
    timeout; one silent for 3 timeouts is lost even if the consumer is late at every check."""
    w = StreamWatchdog(timeout=0.5)
    for k in range(11):
        w.awake(k * 0.1, 0.1)
    w.feed(1.0)
    assert not w.awake(1.1, 0.1) and w.late == 0
    assert w.awake(1.9, 0.1) and w.late == 1 and abs(w.late_max - 0.7) < 1e-9  # 0.8 s between two 0.1 s checks
    assert w.age(1.9) > 0.5 and w.silent(1.9) == 0.0 and not w.lost(1.9)  # samples may wait unread: not lost
    w3 = StreamWatchdog(timeout=0.5)
    w3.awake(0.0, 0.1)
    w3.feed(0.05)
    assert not w3.lost(0.9) and w3.losses == 0  # asked before the overdue check ran: late now, not lost
    w.feed(1.91)  # the backlog arrives: the stream went on
    assert not w.lost(2.0) and w.losses == 0
    # a stream that really stopped while the consumer ran on time: lost after the timeout, as before
    for k in range(7):
        assert not w.awake(2.0 + 0.1 * k, 0.1)
    assert not w.lost(2.4) and w.lost(2.6) and w.losses == 1 and w.silent(2.6) > 0.5
    # late at every check: lost after 3 timeouts all the same
    w2 = StreamWatchdog(timeout=0.5)
    w2.feed(0.0)
    w2.awake(0.0, 0.1)
    for k in range(1, 9):
        assert w2.awake(0.3 * k, 0.1)
        assert w2.lost(0.3 * k) == (0.3 * k > 1.5)


def test_the_automatic_timeout_follows_the_stream_rate_and_a_set_one_wins():
    """Issue 48: joint_state_timeout 0 is 50 periods of the stream's measured rate (at least 0.5 s, at most 10 s);
    a value the user set is used as set. The rate is the driver stream's, measured from the stamps (not from when
    the consumer happened to run)."""
    from payload_estimation.stream import StreamTimeout
    from payload_estimation.stream.driver_stream import DriverStream
    from payload_estimation.stream.watchdog import WatchdogConfigError

    auto = StreamTimeout(0.0)
    assert auto.effective(0.0) == 0.5 and "until the stream's rate is measured" in auto.describe(0.0)
    assert auto.effective(1000.0) == 0.5 and auto.effective(100.0) == 0.5
    assert auto.effective(25.0) == pytest.approx(2.0) and "50 periods of the 25 Hz stream" in auto.describe(25.0)
    assert auto.effective(1.0) == 10.0
    user = StreamTimeout(0.7)
    assert user.effective(25.0) == 0.7 and user.effective(0.0) == 0.7 and user.describe(25.0) == (
        "joint_state_timeout parameter")
    with pytest.raises(WatchdogConfigError, match="joint_state_timeout"):
        StreamTimeout(-1.0)
    # a 20 Hz stream, the arm moving (distinct states): its stamps give 20 Hz whatever the arrival times
    stream, rng = DriverStream(), np.random.default_rng(3)
    for k in range(40):
        q = 0.01 * k + 1e-4 * rng.standard_normal(7)
        stream.take(0.05 * k, q, np.full(7, 0.2), rng.standard_normal(7))
    assert stream.rate == pytest.approx(20.0) and auto.effective(stream.rate) == pytest.approx(2.5)


def test_a_check_at_a_new_period_is_not_judged_late():
    """The sampler checks every 0.25 s while idle and every 0.05 s during a run: the first check after the switch
    comes up to 0.25 s after the last idle one, which is not lateness at either period."""
    w = StreamWatchdog(timeout=0.5)
    for k in range(4):
        assert not w.awake(0.25 * k, 0.25)
    assert not w.awake(0.95, 0.05) and w.late == 0  # the run starts: 0.2 s after the last idle check
    assert not w.awake(1.0, 0.05) and w.awake(1.3, 0.05) and w.late == 1  # from then on judged at 0.05 s
