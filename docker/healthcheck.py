#!/opt/brain/bin/python
"""The image's HEALTHCHECK: GET a path on the local port (default /health); exit 0 on a 2xx answer, else 1.

The image carries no curl; this is the few lines of it the checks need. The port is the container's
listening port (8080 in compose.yml and the chart), the first argument the path (``/health/ready``,
``/ping``).
"""

import sys
import urllib.request

path = sys.argv[1] if len(sys.argv) > 1 else "/health"
port = sys.argv[2] if len(sys.argv) > 2 else "8080"
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=4) as answer:
        sys.exit(0 if 200 <= answer.status < 300 else 1)
except Exception as exc:  # any failure is "unhealthy", said in one line for `docker inspect`
    print(f"unhealthy: {exc}", file=sys.stderr)
    sys.exit(1)
