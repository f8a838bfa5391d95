"""Write the families README.md and docs/probes.md list, rendered from interp.hf.families (the lists that
tests/hf/test_families.py checks), between their <!-- begin:families --> markers.

    PYTHONPATH=. .venv/bin/python scripts/family_list.py [--repo .]

No model is built: the lists are constants; tests/hf/test_families.py checks them against what fails and that the
pages say what they render.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.hf.families import write_docs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]),
                        help="the repository whose README.md and docs/probes.md are written (default: this one)")
    for path in write_docs(Path(parser.parse_args(argv).repo)):
        print(path)


if __name__ == "__main__":
    main()
