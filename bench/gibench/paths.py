"""Where things live: repository root, cache (never committed), outputs."""
import os
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
CACHE = Path(os.environ.get("BENCH_CACHE", BENCH / ".cache"))
DATA_CACHE = CACHE / "data"
OUT = Path(os.environ.get("BENCH_OUT", ROOT / "docs" / "benchmarks"))
