bench:
	scripts/bench.sh

test:
	scripts/test.sh

demo:
	scripts/demo.sh

.PHONY: bench test demo
