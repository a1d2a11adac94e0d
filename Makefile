bench:
	scripts/bench.sh

# The same benchmark against SQLCipher 4, in the Debian trixie root (needs root).
bench4:
	scripts/sqlcipher4-bench.sh

test:
	scripts/test.sh

demo:
	scripts/demo.sh

.PHONY: bench bench4 test demo
