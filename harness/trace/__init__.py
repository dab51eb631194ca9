"""The trace model, generator, content and formats."""
