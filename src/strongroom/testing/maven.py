"""Fetch something from Maven Central once into a cache directory (the Kafka jars, Apicurio Registry).

``$STRONGROOM_MAVEN_ARGS`` adds arguments to every Maven call (``-s settings.xml`` for a corporate mirror,
``-o`` for offline). A fetch lands in a staging directory next to the target and replaces it only when
Maven succeeded and ``complete`` accepts the result, so an interrupted fetch never leaves a half cache.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from strongroom.errors import StackError

COMPLETE_MARK = ".complete"


def maven(what: str, *, otherwise: str = "") -> str:
    """The ``mvn`` executable, or a StackError saying it is needed once to fetch ``what``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError(
            f"Maven (`mvn`) is needed once to fetch {what} from Maven Central",
            hint="install Maven (Debian: apt-get install maven)" + (f" or {otherwise}" if otherwise else ""),
        )
    return mvn


def fetched(target: Path) -> bool:
    """True when ``target`` holds a complete earlier fetch."""
    return (target / COMPLETE_MARK).exists()


def fetch_into(
    target: Path, what: str, version: str, goal_args: Sequence[str], *,
    complete: Callable[[Path], bool] = lambda _staging: True,
) -> None:  # fmt: skip
    """Run ``mvn -B -q <goal_args> -DoutputDirectory=<staging>`` and move the staging directory to ``target``.

    Maven runs in a scratch directory (some goals write marker files under the project's base directory).
    A failure is one StackError quoting Maven's ERROR lines and naming where Maven Central must be reachable."""
    mvn = maven(what)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
    cmd = [mvn, "-B", "-q", *goal_args, f"-DoutputDirectory={staging}",
           *shlex.split(os.environ.get("STRONGROOM_MAVEN_ARGS", ""))]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="strongroom-mvn-") as scratch:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=scratch)
    if proc.returncode != 0 or not complete(staging):
        shutil.rmtree(staging, ignore_errors=True)
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        detail = "\n".join(line for line in lines if "ERROR" in line)[-2000:] or "\n".join(lines[-10:])
        raise StackError(
            f"Maven could not fetch {what} {version} from Maven Central:\n{detail}",
            hint="check that https://repo1.maven.org is reachable (proxy settings in ~/.m2/settings.xml)",
        )
    (staging / COMPLETE_MARK).write_text(version + "\n")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
