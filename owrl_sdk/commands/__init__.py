"""owrl's own subcommands, each registered as a default plugin like any other."""
