"""grumem: GRU-Mem rollouts over agent transcripts, recorded byte for byte, exported for verl."""

__version__ = "0.1.0"
