"""How the commands run and what they print besides their results.

A console for the results (wide and plain when piped), error and warning messages on stderr,
a spinner and a progress bar (on a terminal only), and the ingest reports of the tables the
running command has read. :func:`run` runs a command's work: a heroeval error becomes the
ingest tables read so far (often the reason), a message on stderr and exit code 2.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from heroeval.cli._messages import to_cli
from heroeval.errors import HeroEvalError, HeroEvalWarning

if TYPE_CHECKING:  # annotations only (strings at run time)
    from rich.console import Console

    from heroeval.ingest.annotations import IngestReport


def console() -> Console:
    # a wide, plain layout when piped; rich detects colour and width on a terminal
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 132)


def err(msg: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False).print(f"[bold red]error:[/bold red] {escape(to_cli(msg))}", soft_wrap=True)


INGESTED: list[tuple[str, IngestReport]] = []
"""(title, report) of every table set the running command has read, in order: printed first, or before an error."""


_Read = TypeVar("_Read", bound=Any)


def register(title: str, ds: _Read) -> _Read:
    """Keep a read table's ingest report (an AnnotationSet's or a CompactHistory's) for the ingest tables."""
    INGESTED.append((title, ds.report))
    return ds


def ingest_tables() -> list[Any]:
    from heroeval.report import terminal as _render

    return [_render.ingest_table(rep, title, say=to_cli) for title, rep in INGESTED]


def run(fn: Any) -> Any:
    """Run ``fn`` turning heroeval errors into a clean message and exit code 2."""
    from rich.console import Console
    from rich.markup import escape

    from heroeval.report import terminal as _render

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", HeroEvalWarning)
            out = fn()
    except HeroEvalError as exc:
        if INGESTED:  # what was read before the failure: often the reason
            _render.print_all(Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 132),
                              *ingest_tables())
        err(str(exc))
        raise typer.Exit(2) from None
    finally:
        for w in caught:
            if issubclass(w.category, HeroEvalWarning):
                Console(stderr=True, highlight=False).print(
                    f"[yellow]warning ({w.category.__name__}):[/yellow] {escape(to_cli(str(w.message)))}",
                    soft_wrap=True)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return out


@contextmanager
def progress(what: str, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A transient rich progress bar on stderr fed by ``tick(done, total)``; None when stderr is not a terminal."""
    from rich.console import Console

    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(what, total=None)
        yield lambda done, total: prog.update(task, completed=done, total=total)


@contextmanager
def busy(what: str) -> Iterator[Callable[[str], None] | None]:
    """A transient spinner on stderr while a long step (reading, Stage A's EM) runs; nothing when piped.

    Yields ``say(text)``, which replaces the spinner's text (None when stderr is not a terminal).
    """
    from rich.console import Console

    if not sys.stderr.isatty():
        yield None
        return
    with Console(stderr=True).status(what) as status:
        yield lambda text: status.update(text)
