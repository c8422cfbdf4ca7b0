"""One module per workflow rule, named as the rule and its subcommand: the I/O shell
of each stage (rule `gates` -> `grumem gates` -> grumem.stages.gates)."""
