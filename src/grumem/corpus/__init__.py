"""The parts of the corpus export (card 004), each one job; grumem.stages.export is
their I/O shell: kappa_gate (kappa.json clears the bar), log_reader (the
turn log, checked, grouped into trajectories, its recordings verified),
trajectory (reward assembly into card 004's record), parquet (verl's row
shape and the row-group sink), summary (the counts card 004 asks for)."""
