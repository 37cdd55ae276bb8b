"""Run a command, pass its output through as it comes, and fail it if it printed what a user must never see.

``make demo`` runs ``strongroom demo`` through this. A raw librdkafka line (``%3|…|FAIL|…``) or a deprecation
banner on a newcomer's first run is a bug (issue 15), and only a parent process sees them: librdkafka writes to
the file descriptor, past Python's logging. Running the check here means CI, which runs ``make demo`` after
``make test``, checks the demo once rather than running it twice (the test that checks the same output is left
out of CI's ``make test``; a developer's ``make test`` still runs it).

Usage: ``python -m strongroom.testing.quiet_run COMMAND [ARG...]``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

RAW_LIBRDKAFKA_LINE = re.compile(r"^%\d\|.*$", re.MULTILINE)
DEPRECATION = re.compile(r"^.*deprecat.*$", re.MULTILINE | re.IGNORECASE)


def offending_lines(output: str) -> list[str]:
    """The lines of ``output`` a user must never see: raw librdkafka lines and deprecation banners."""
    return RAW_LIBRDKAFKA_LINE.findall(output) + DEPRECATION.findall(output)


def run_quietly(argv: list[str]) -> int:
    """Run ``argv`` with its stdout and stderr passed through line by line; its exit code, or 3 if it printed an
    offending line (the lines are listed at the end)."""
    seen: list[str] = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # a pipe would hold a Python child's output back in blocks
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            seen.extend(offending_lines(line))
    if child.returncode != 0:
        return child.returncode
    if seen:
        print(f"\n{len(seen)} line(s) above must never reach a user's terminal (a bug to fix):", file=sys.stderr)
        for line in seen[:20]:
            print(f"  {line}", file=sys.stderr)
        return 3
    return 0


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python -m strongroom.testing.quiet_run COMMAND [ARG...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_quietly(sys.argv[1:]))


if __name__ == "__main__":
    main()
