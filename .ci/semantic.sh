#!/usr/bin/env bash
# Semantic cache CI needs: Debian's redis-server for tests/test_semantic_redis.py (the test
# starts its own server on 127.0.0.1 and is skipped without the binary), and the redis client.
# Idempotent; torch / sentence-transformers are NOT needed by the test suite.
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
fi
python -c "import redis" 2>/dev/null || python -m pip install -q "redis>=5.0"
