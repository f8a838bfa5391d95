"""Print the import cycles tests/test_structure.py refuses, each edge with the file:line of the imports behind it:
cycles between packages (never allowed) and cycles inside one package (allowed only where docs/ARCHITECTURE.md's
"Allowed cycles" section names them and says why).

    .venv/bin/python scripts/import_cycles.py [--import-time] [--dynamic]

The graph logic lives in tests/test_structure.py (the test and this script read one graph); exit status 1 when
the test would fail.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import test_structure as structure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import-time", action="store_true",
                        help="only the imports that run when a module is imported (default: every import)")
    parser.add_argument("--dynamic", action="store_true",
                        help="also list import_module / __import__ calls with a computed name (no graph sees them)")
    args = parser.parse_args(argv)
    mods = structure.all_modules()
    sites = (structure.import_sites(mods, structure.import_time_imports) if args.import_time
             else structure.full_import_sites(mods))
    graph = "import-time imports" if args.import_time else "every import, TYPE_CHECKING excluded"
    between = structure.package_cycles(sites)
    print(f"== cycles between packages ({graph}): {len(between)}")
    for component in between:
        print(structure.describe_cycle(sites, mods, component, structure.unit), end="\n\n")
    text = structure._architecture_text()
    parsed = structure.parse_allowed_cycles(text) if text is not None else None
    inside = structure.intra_package_cycles(sites)
    problems = structure.check_intra_package_cycles(sites, mods, text)
    print(f"== cycles inside one package: {len(inside)}"
          f"{'' if parsed is not None else ' (ARCHITECTURE.md has no Allowed cycles section)'}")
    for bullet in parsed[0] if parsed else []:
        if sorted(bullet.modules) in inside:
            print(f"allowed by ARCHITECTURE.md:{bullet.line}: {bullet.chain}: {bullet.reason}")
    for problem in problems:
        print(problem, end="\n\n")
    if args.dynamic:
        dynamic = structure.dynamic_imports(mods)
        print(f"== imports by computed name: {len(dynamic)}")
        print("\n".join(dynamic))
    return 1 if between or problems else 0


if __name__ == "__main__":
    sys.exit(main())
