"""Joint samples and what is done to them before a fit: the :class:`Samples` record, filters, resampling,
alignment of two recordings, settling (is the arm at rest?), static captures, effort to torque.

Filters have distinct names: :func:`zero_phase_lowpass` (offline, Butterworth forward-backward) and
:func:`causal_lowpass` (online, irregular stamps). ``check_static`` is the settle check over a window of
stamped samples (:mod:`.settle`); :func:`.samples.require_static` refuses a record that moves. The gains
function is ``signals.torque_gains.torque_gains``: it shares its module's name, which an API name cannot.
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: the filters pull in scipy)
_API = {
    "samples": ("NotStaticError", "SampleDataError", "Samples", "select_static"),
    "filters": ("SignalError", "differentiate", "zero_phase_lowpass"),
    "causal": ("causal_lowpass", "causal_lowpass_derivative"),
    "resample": ("MAX_GAP", "Resampled", "StampReport", "derive_velocity", "split_by_time", "stamp_report"),
    "alignment": ("Alignment", "AlignmentError", "align_recordings", "find_time_shift"),
    "preprocessing": ("Preprocessed", "PreprocessingError", "periodic_rate", "preprocess_filtered",
                      "preprocess_periodic"),
    "settle": ("SampleWindow", "SettleConfig", "SettleResult", "check_static"),
    "segments": ("StaticCapture", "match_captures", "static_captures"),
    "torque_gains": ("apply_torque_gain", "effort_to_torque"),
    "torque_sign": ("TorqueSign", "TorqueSignGate", "TorqueSignWatch", "check_torque_sign"),
    "stampless": ("StamplessTiming", "stamps_from_rate"),
}
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
