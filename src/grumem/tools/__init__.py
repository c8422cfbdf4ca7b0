"""Commands that are no workflow rule: looking at one prompt or one parse, serving the
embedded model by hand. Each module has the `main(args)` of its subcommand."""
