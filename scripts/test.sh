#!/usr/bin/env bash
# The whole test suite, set-up included: the Python readers the interop tests compare with
# (deltalake, polars, DuckDB, and Sail with its Spark Connect client; installed into .peers/
# from PyPI), then every Rust test with fail points compiled in.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .peers/bin/python -c 'import deltalake, pyarrow, polars, duckdb, pysail, pyspark' 2>/dev/null; then
  python3 -m venv .peers
  .peers/bin/pip install --quiet --disable-pip-version-check deltalake pyarrow polars duckdb \
    pysail==0.7.2 pyspark-client==4.2.0 'pandas<3'
fi
export TIDEMARK_PYTHON="$PWD/.peers/bin/python"
cargo test --features failpoints "$@"
