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

test:
	scripts/test.sh

demo:
	scripts/demo.sh

.PHONY: bench bench4 bench-fleet bench-fleet4 test demo
