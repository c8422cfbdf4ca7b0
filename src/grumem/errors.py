"""The base of every error a user can act on; the CLI prints these as one line and exits 1."""


class GrumemError(Exception):
    exit_code = 1
