"""Training the GRU-Mem loop with verl (0.9.1): the sessions row, the agent loop,
its group step, and the seams verl is extended at (see docs/verl.md)."""
