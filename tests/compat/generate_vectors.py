"""Write the frozen vectors: ``python tests/compat/generate_vectors.py [--force]``.

Only for vectors that do not exist yet (a new case, a new format version). Existing files are
never overwritten without ``--force``, and ``--force`` on a released vector means old data no
longer reads — see vector_cases.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from vector_cases import CASES, build

VECTORS = Path(__file__).parent / "vectors"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true", help="overwrite existing vector files")
    args = parser.parse_args()
    VECTORS.mkdir(exist_ok=True)
    for case in CASES:
        path = VECTORS / f"{case.name}.json"
        if path.exists() and not args.force:
            print(f"kept    {path}")
            continue
        path.write_text(json.dumps(build(case), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote   {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
