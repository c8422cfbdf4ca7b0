"""The parts of the corpus export, each one job; grumem.stages.export is their I/O
shell: kappa_gate (kappa.json clears the bar), log_reader (the turn log, checked,
grouped into trajectories, its recordings verified), trajectory (reward assembly
into each trajectory's record), advantage_table (the advantages between the two
passes), turn_rows and rollout_rows (the rows of turns.parquet and
sessions.parquet), summary (the export's counts), card (the dataset card)."""
