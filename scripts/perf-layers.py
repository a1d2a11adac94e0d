#!/usr/bin/env python3
"""Reads `perf script -F ip,sym,dso` (with call graphs) on stdin and prints the share of samples
per layer of a Fluent-over-SQLite process: encryption (libcrypto), the SQLite engine, the
EncryptedSQLite library, the driver, Fluent and SQLKit, NIO, the workload, the kernel. A sample
whose leaf is in the Swift runtime, libc, Foundation or Dispatch is counted to the nearest caller
in one of those layers (or to "runtime, unattributed" when none is on the stack).
Used by scripts/fluent-cost.sh; argv[1] names the process in the output."""
import re
import sys
from collections import Counter

LAYERS = {
    "encryption (libcrypto)": [],
    "SQLite engine": [],
    "EncryptedSQLite library": ["SQLCipherConnection", "EncryptedSQLite", "CipherFormats", "KeyConfiguration", "DurableFiles", "DatabaseMigrations"],
    "the driver": ["FluentEncryptedSQLiteDriver", "FluentSQLiteDriver", "SQLiteKit", "SQLiteNIO"],
    "Fluent and SQLKit": ["FluentKit", "FluentSQL", "SQLKit", "AsyncKit"],
    "NIO": ["NIOCore", "NIOPosix", "NIOConcurrencyHelpers", "NIOEmbedded", "_NIODataStructures", "NIOFoundationCompat"],
    "the workload (models, timing)": ["FluentWorkload", "fluent_cost_plain", "fluent_cost_encrypted"],
}
MODULE = {module: layer for layer, modules in LAYERS.items() for module in modules}


def layer(symbol, dso):
    if "libcrypto" in dso:
        return "encryption (libcrypto)"
    if "libsqlcipher" in dso or symbol.startswith("sqlite3") or symbol.startswith("sqlcipher"):
        return "SQLite engine"
    if "kernel" in dso:
        return "kernel (I/O, scheduling)"
    match = re.match(r"\$s(\d+)", symbol)
    if match:
        count = int(match.group(1))
        module = symbol[len(match.group(0)):len(match.group(0)) + count]
        return MODULE.get(module)
    return None


samples = Counter()
frames = []


def flush():
    if not frames:
        return
    for symbol, dso in frames:
        found = layer(symbol, dso)
        if found:
            samples[found] += 1
            break
    else:
        samples["runtime, unattributed"] += 1
    frames.clear()


for line in sys.stdin:
    if not line.strip():
        flush()
        continue
    match = re.match(r"\s*[0-9a-f]+\s+(\S+?)(\+0x[0-9a-f]+)?\s+\((.*)\)\s*$", line)
    if match:
        frames.append((match.group(1), match.group(3)))
flush()
total = sum(samples.values())
print(f"{sys.argv[1] if len(sys.argv) > 1 else 'process'}: {total} samples")
for name, count in samples.most_common():
    print(f"  {100 * count / total:5.1f}%  {name}")
