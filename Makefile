# Conveniences over dev.py, which needs nothing but Python 3.11.
.PHONY: run test bench
run:
	python3 dev.py run
test:
	python3 dev.py test
bench:
	python3 dev.py bench
