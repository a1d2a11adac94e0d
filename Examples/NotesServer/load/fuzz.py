#!/usr/bin/env python3
"""A short seeded fuzz of notes-server's API (issue 36), over raw sockets to 127.0.0.1.

Each request is drawn from the seed: a method (the API's, others, made-up tokens), a path (the
routes, ids such as +1, 01, -1, %00, huge numbers, unknown paths), query parameters (q, author,
before, limit, fresh, others) with values from plain words to 70,000-byte runs of %, NULs and
invalid percent-escapes, headers, and for bodies: notes within and past their limits, JSON of the
wrong shape, invalid UTF-8, a malformed chunk size, a body cut short then a half-close. One
request per connection; every connection ends in a half-close, so no request waits on the
server's read timeout.

Checks: no 5xx but 503 (documented: the database busy or not open); no SQL and no path of the
server's files in any answer other than a note the fuzz itself stored; an answer to every
well-formed request; and afterwards GET /notes and GET /health?fresh=1 answer 200.

  fuzz.py --port P [--requests N] [--seed S] [--forbid TEXT]...   (--forbid: the server's folder)

Prints the seed first (give it back with --seed to replay a run) and one line
"FUZZ seed=… requests=… …" last; exits 1 on a failed check, listing the first failures.
"""
import argparse
import json
import random
import socket
import sys
import time

SQL_MARKERS = ["SELECT ", "INSERT ", " LIKE ", "FROM notes", "SQLite", "sqlite3", ".sqlite"]


def words(rng):
    return rng.choice(["hello", "load", "ann", "a", "", "ü", "日本", "%", "_", "\\", "'", "\"", "' OR '1'='1",
                       "'; DROP TABLE notes; --", "%00", "%ZZ", "%", "%%", "+", " ", "%2B1", "\x7f"])


def value(rng):
    """A query value, already as it goes on the wire (percent-escapes included)."""
    kind = rng.randrange(10)
    if kind < 4:
        return words(rng)
    if kind == 4:
        return "%" + "".join(rng.choice("0123456789ABCDEFabcdefZ%") for _ in range(2))
    if kind == 5:
        return "".join("%%%02X" % rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    if kind == 6:
        return rng.choice(["a", "%25", "%00", "_", "x"]) * rng.choice([1023, 1024, 1025, 5000, 25000, 49999])
    if kind == 7:
        return str(rng.choice([0, 1, -1, 2**63 - 1, 2**63, 10**30, rng.randrange(1000)]))
    if kind == 8:
        return rng.choice(["+1", "01", "1x", " 1", "1.0", "0x10", "1e3"])
    return "".join(rng.choice("abc%/?&=#+;") for _ in range(rng.randrange(1, 20)))


def path(rng):
    base = rng.choice(["/notes", "/notes/ID", "/search", "/health", "/metrics", "/", "/notes/ID/x", "/nothing",
                       "//notes", "/NOTES", "/notes/", "/%6Eotes"])
    base = base.replace("ID", value(rng) if rng.random() < 0.5 else str(rng.randrange(1, 50)))
    params = [(rng.choice(["q", "author", "before", "limit", "fresh", "x", "q", "q"]), value(rng)) for _ in range(rng.randrange(4))]
    if params:
        base += "?" + "&".join(k + ("" if rng.random() < 0.05 else "=" + v) for k, v in params)
    # Characters a request line cannot hold make it malformed, which is fine: it is sent as it is.
    return base


def note_body(rng):
    kind = rng.randrange(12)
    text = rng.choice(["fuzz note", words(rng), "x" * rng.choice([0, 1, 65535, 65536, 65537, 70000])])
    author = rng.choice(["ann", "", "b" * rng.choice([255, 256, 257, 5000]), words(rng), "\u0000", "a\u0000b"])
    if kind < 6:
        return json.dumps({"text": text, "author": author}).encode()
    if kind == 6:
        return json.dumps({"text": rng.randrange(10), "author": None}).encode()
    if kind == 7:
        return b"[" * rng.choice([10, 1000, 10000]) + b"]" * rng.randrange(3)
    if kind == 8:
        return b'{"text": "\xff\xfe", "author": "ann"}'
    if kind == 9:
        return b'{"text": "cut'
    if kind == 10:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    return json.dumps({"text": "t", "author": "a", "id": 1, "extra": [1, 2]}).encode()


def request(rng):
    """The bytes of one request, and whether it is well-formed HTTP (then it must be answered)."""
    method = rng.choice(["GET"] * 6 + ["POST"] * 4 + ["PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW", "get", "X" * 40])
    target = "/notes" if method == "POST" and rng.random() < 0.6 else path(rng)
    well_formed = method.isupper() and all(33 <= ord(c) < 127 for c in target) and "#" not in target
    headers = ["Host: 127.0.0.1", "Connection: close"]
    body = b""
    if method in ("POST", "PUT", "PATCH") or rng.random() < 0.05:
        body = note_body(rng)
        headers.append(rng.choice(["Content-Type: application/json", "Content-Type: text/plain", "Content-Type: application/json"]))
        framing = rng.randrange(10)
        if framing < 7:
            headers.append("Content-Length: %d" % len(body))
        elif framing == 7:
            headers.append("Transfer-Encoding: chunked")
            body = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
        elif framing == 8:
            headers.append("Transfer-Encoding: chunked")
            body = rng.choice([b"zz\r\n", b"-1\r\n", b"ffffffffffffffffff\r\n", b"5\r\nab"])
            well_formed = False
        else:
            headers.append("Content-Length: %d" % (len(body) + rng.randrange(1, 100)))  # cut short
            well_formed = False
    if rng.random() < 0.05:
        headers.append(rng.choice(["X-Long: " + "h" * 5000, "Content-Length: abc", "Content-Length: -1", "Expect: 100-continue", "Bad Header"]))
        well_formed = False
    head = "%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, target, "\r\n".join(headers))
    return head.encode("utf-8", "surrogateescape") + body, well_formed, method, target


def exchange(port, data, timeout=20):
    """Sends data, half-closes, and returns every byte the server sent until it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close before all of a bad request was sent
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (ConnectionResetError, socket.timeout):
            pass
        return b"".join(chunks)


def parse(reply):
    """(status, headers, body) of an HTTP answer, or None."""
    head, sep, body = reply.partition(b"\r\n\r\n")
    if not sep or not head.startswith(b"HTTP/1.1 "):
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0][9:12]), headers, body.decode("utf-8", "replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--forbid", action="append", default=[], help="text no answer may contain (the server's folder)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print("fuzz: seed %d (replay with --seed %d)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    statuses, failures, no_answer, start = {}, [], 0, time.monotonic()
    for n in range(args.requests):
        data, well_formed, method, target = request(rng)
        answer = parse(exchange(args.port, data))
        what = "#%d %s %s" % (n, method, target[:80])
        if answer is None:
            no_answer += 1
            if well_formed:
                failures.append("%s: no answer to a well-formed request" % what)
            continue
        status, headers, body = answer
        statuses[status] = statuses.get(status, 0) + 1
        if status >= 500 and status != 503:
            failures.append("%s: %d %s" % (what, status, body[:200]))
        # A note the fuzz stored may hold any text; everything else must show nothing of the server's inside.
        markers = args.forbid + ([] if status < 300 and target.startswith(("/notes", "/search")) else SQL_MARKERS)
        for marker in markers:
            if marker in body:
                failures.append("%s: %r in the answer %d %s" % (what, marker, status, body[:200]))
    for check in ["/notes?limit=1", "/health?fresh=1"]:
        answer = parse(exchange(args.port, ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % check).encode()))
        if answer is None or answer[0] != 200:
            failures.append("after the fuzz, GET %s: %s" % (check, answer and answer[:3:2]))
    summary = ",".join("%d:%d" % item for item in sorted(statuses.items()))
    print("FUZZ seed=%d requests=%d answered=%d no_answer=%d statuses=%s failures=%d seconds=%.1f" % (
        seed, args.requests, args.requests - no_answer, no_answer, summary, len(failures), time.monotonic() - start))
    for failure in failures[:20]:
        print("fuzz: FAIL " + failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
