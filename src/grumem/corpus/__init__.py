"""The parts of the corpus export, each one job; grumem.stages.export is
their I/O shell: kappa_gate (kappa.json clears the bar), log_reader (the
turn log, checked, grouped into trajectories, its recordings verified),
trajectory (reward assembly into the trajectory record), turn_rows and
rollout_rows (verl's row shapes), summary (the corpus's counts)."""
