#!/usr/bin/env bash
# One command for the benchmark report: release build, the ../shared/bench workload, tidemark
# and its peers side by side, docs/benchmarks.md written. Extra arguments go to bench.py
# (--reps N, --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${TIDEMARK_SHARED_BENCH:-../shared/bench}"
cargo build --release
target="${CARGO_TARGET_DIR:-target}"
if ! .peers/bin/python -c 'import deltalake, polars, pyarrow, duckdb, numpy' 2>/dev/null; then
  python3 -m venv .peers
  .peers/bin/pip install --quiet --disable-pip-version-check deltalake polars pyarrow duckdb numpy
fi
.peers/bin/python bench/bench.py "$target/release/tidemark" "$shared" "${TIDEMARK_BENCH_DIR:-bench-data}" "$@"
.peers/bin/python bench/files.py "$target/release/tidemark" "${TIDEMARK_BENCH_DIR:-bench-data}/files"
if ! .peers/bin/python -c 'import connectorx, dlt, psycopg2' 2>/dev/null; then
  .peers/bin/pip install --quiet --disable-pip-version-check connectorx "dlt[postgres]" sqlalchemy psycopg2-binary
fi
.peers/bin/python bench/databases.py "$target/release/tidemark" "${TIDEMARK_BENCH_DIR:-bench-data}/databases"
