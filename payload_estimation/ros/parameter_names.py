"""Every parameter name of the package's nodes, by node. Generated from the nodes' parameter tables by
tools/gen_ros_docs.py: edit the tables, then run it (test_parameter_names fails when this file is stale).

:func:`.parameters.package_parameter_names` reads it, so the parameter mechanics import neither the nodes' tables
(which import the mechanics: an import circle) nor sim_node's (which imports MuJoCo).
"""

NODE_PARAMETERS: dict[str, frozenset[str]] = {
    "payload_estimator": frozenset({
        "anchor_samples", "anchor_window", "base_link", "calibration_file", "export_dir", "grasp_com_prior",
        "grasp_com_prior_std", "grasp_inertia_prior", "grasp_inertia_prior_std", "gravity_model", "joint_names",
        "joint_state_timeout", "max_com_radius", "max_com_std", "max_mass_std", "max_payload",
        "max_position_spread", "max_recording", "max_stamp_jump", "max_torque_drift", "max_torque_std",
        "max_velocity", "max_window", "method", "min_average_samples", "model_uncertainty", "online_estimation",
        "restart_samples", "robot", "tip_link", "torque_drift_relative", "torque_gain", "torque_noise",
        "torque_offset_std", "window"
    }),
    "payload_sampler": frozenset({
        "amplitude_deg", "arrival_timeout", "arrival_tolerance_deg", "base_link", "capture_period",
        "collision_clear_timeout", "dwell", "excitation_duration", "excitation_harmonics",
        "excitation_max_acceleration", "excitation_velocity_scale", "joint_names", "joint_state_timeout",
        "limit_margin_deg", "max_position_spread", "max_stamp_jump", "max_torque_drift", "max_torque_std",
        "max_velocity", "max_window", "min_average_samples", "min_duration", "mode", "monitor_fit_delay",
        "monitor_timeout", "n_poses", "pick_rest_timeout", "require_monitor", "restart_samples", "robot",
        "service_timeout", "sweep_amplitude_deg", "sweep_poses", "sweep_velocity_scale", "tip_link",
        "torque_drift_relative", "velocity_scale", "window"
    }),
    "collision_monitor": frozenset({
        "base_link", "confirm_samples", "contact_estimation", "dynamic_model", "gains", "hold_time",
        "joint_names", "joint_state_timeout", "max_com_radius", "max_payload", "max_stamp_jump", "n_sigma",
        "payload_as_point_mass", "payload_event_floor", "payload_event_window", "payload_lost_stop", "policy",
        "quadrature", "release_fraction", "residual_decimation", "restart_samples", "resume_delay",
        "resume_min_duration", "resume_velocity_scale", "robot", "sampling_threshold_factor",
        "sensor_torque_noise", "sensor_velocity_noise", "stop_deceleration", "threshold_calibration_file",
        "threshold_calibration_minimum", "threshold_calibration_safety", "threshold_margin", "threshold_speed",
        "thresholds", "tip_link", "torque_gain"
    }),
    "sim_node": frozenset({
        "base_link", "clock_rate_hz", "contact_duration", "coulomb", "dt", "initial_positions", "joint_names",
        "lowpass_hz", "model_error", "noise_std", "offset", "payload_attached", "payload_com",
        "payload_inertia", "payload_mass", "rate_hz", "real_time_factor", "robot", "seed",
        "sensor_sees_friction", "tip_link", "viscous"
    }),
}

__all__ = ["NODE_PARAMETERS"]
