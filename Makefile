bench:
	scripts/bench.sh

# The same benchmark against SQLCipher 4, in the Debian trixie root (needs root).
bench4:
	scripts/sqlcipher4-bench.sh

# The fleet benchmark of issue 22 (wrapped data keys, master-key rotation, SoftHSM2), then against SQLCipher 4 (needs root).
bench-fleet:
	scripts/fleet-bench.sh

bench-fleet4:
	scripts/sqlcipher4-fleet-bench.sh

# The pause benchmark of issue 23 (a service during foreground and background rotation, 256 MB and 2 GB,
# 3 runs; ~7 GB free in $TMPDIR), then against SQLCipher 4 (needs root).
bench-background:
	scripts/bench.sh --only background-rotation --background-mb 256,2048 --background-runs 3

bench-background4:
	scripts/sqlcipher4-bench.sh --only background-rotation --background-mb 256,2048 --background-runs 3

test:
	scripts/test.sh

demo:
	scripts/demo.sh

# The mutation pass (Tests/README.md): each safety mutant in Tests/Mutants/ must fail its tests.
mutate:
	scripts/mutate.sh

.PHONY: bench bench4 bench-fleet bench-fleet4 bench-background bench-background4 test demo mutate
