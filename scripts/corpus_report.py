"""Write the english corpus's table and the contamination report's tables into docs/ (see interp/data/report.py).

    PYTHONPATH=. .venv/bin/python scripts/corpus_report.py [--out docs] [--no-tokens]

The first run builds the english corpus (~40 s) and trains/loads the default BPE; later runs read the caches.
"""

from __future__ import annotations

import argparse

from interp.data.report import write_reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs", help="folder of the written files (default docs)")
    parser.add_argument("--no-tokens", action="store_true", help="skip the token counts (tokenizers not loaded)")
    args = parser.parse_args(argv)
    for path in write_reports(args.out, with_tokens=not args.no_tokens):
        print(path)


if __name__ == "__main__":
    main()
