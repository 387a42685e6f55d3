"""The ``hero`` command line: parse options, call the workflows, render the results."""

from heroeval.cli.commands import app, main

__all__ = ["app", "main"]
