"""The verbs, one module per group: flags in, one call each."""
