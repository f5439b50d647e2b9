#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub's file protocol, for testing downloads offline.

Serves the files under MODEL_DIR as repository REPO (`org/name`) on a free loopback port:
`GET /{REPO}/resolve/{revision}/{path}` with an optional `Range: bytes=a-` header, answered
with `etag`, `x-repo-commit` and `content-range`, which is what the hf-hub crate reads.
Prints `HF_ENDPOINT=http://127.0.0.1:<port>` on its first line, then serves until killed.

    python3 scripts/hub-standin.py sentence-transformers/all-MiniLM-L6-v2 MODEL_DIR

Nothing leaves loopback. Python's standard library only.
"""
import hashlib
import http.server
import os
import sys

COMMIT = "1" * 40


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: hub-standin.py ORG/NAME MODEL_DIR")
    repo, root = sys.argv[1], os.path.realpath(sys.argv[2])
    prefix = f"/{repo}/resolve/"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if not self.path.startswith(prefix):
                return self.send_error(404)
            rel = self.path[len(prefix):].split("/", 1)[-1]
            path = os.path.realpath(os.path.join(root, rel))
            if not path.startswith(root + os.sep) or not os.path.isfile(path):
                return self.send_error(404)
            with open(path, "rb") as f:
                body = f.read()
            start = 0
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes="):
                start = min(int(rng[6:].split("-")[0] or 0), len(body))
            end = start if rng == "bytes=0-0" else len(body) - 1
            part = body[start:end + 1]
            self.send_response(206)
            self.send_header("etag", '"' + hashlib.sha256(body).hexdigest() + '"')
            self.send_header("x-repo-commit", COMMIT)
            self.send_header("content-range", f"bytes {start}-{end}/{len(body)}")
            self.send_header("content-length", str(len(part)))
            self.end_headers()
            self.wfile.write(part)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"HF_ENDPOINT=http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
