"""The `rhythm` command line. Errors become one line here, and only here (STYLE 12, 14)."""

from __future__ import annotations

import os
import sys

from rich.markup import escape

from common.errors import RhythmError
from rhythm.cli._common import err_console, plain
from rhythm.cli.main import app

# Global options (the root callback's): accepted anywhere on the line, as README shows
# (`rhythm sql --db other.duckdb "..."`); moved in front of the subcommand before parsing.
GLOBAL_VALUE_OPTIONS = ("--db", "--home")
GLOBAL_FLAGS = ("--debug",)


def hoist_global_options(args: list[str]) -> list[str]:
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        if a in GLOBAL_VALUE_OPTIONS and i + 1 < len(args):
            front += [a, args[i + 1]]
            i += 2
            continue
        if a in GLOBAL_FLAGS or a.startswith(tuple(o + "=" for o in GLOBAL_VALUE_OPTIONS)):
            front.append(a)
        else:
            rest.append(a)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> int:
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    debug = "--debug" in args or os.environ.get("RHYTHM_DEBUG", "") not in ("", "0")
    # Everything Rhythm writes (the database and its WAL, config, tokens, logs, reports,
    # exports) is the person's health data: readable by them alone.
    umask = os.umask(0o077)
    try:
        return _run(args, debug)
    finally:
        os.umask(umask)


def _run(args: list[str], debug: bool) -> int:
    try:
        # Typer/click handle usage errors, --help and exit codes themselves (SystemExit).
        app(args=args, prog_name="rhythm", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except RhythmError as e:
        if debug:
            raise
        err_console.print(f"[red]error:[/red] {escape(plain(str(e)))}", highlight=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted; nothing half-written was kept")
        return 130
    except OSError as e:
        if debug:
            raise
        where = f" {e.filename}" if getattr(e, "filename", None) else ""
        err_console.print(f"[red]error:[/red]{escape(plain(where))}: {escape(plain(str(e.strerror or e)))}", highlight=False, soft_wrap=True)
        return 1
    except Exception as e:  # the last resort: a bug still gets one line (--debug: the traceback)
        if debug:
            raise
        duckdb = sys.modules.get("duckdb")  # loaded by the commands that open the database
        if duckdb is not None and isinstance(e, duckdb.Error):
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            err_console.print(f"[red]error:[/red] database: {escape(plain(first))}", highlight=False, soft_wrap=True)
            return 1
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        err_console.print(
            f"[red]error:[/red] unexpected {escape(type(e).__name__)}{': ' + escape(plain(first[:300])) if first else ''} "
            "(a bug in Rhythm: run again with --debug for the traceback and report it)",
            highlight=False, soft_wrap=True,
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
