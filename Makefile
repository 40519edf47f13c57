# Convenience targets; the scripts are the source of truth (they work without make too).
.PHONY: run test build bench soak fuzz-long catalog clean
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
build:
	cmake -S . -B build && cmake --build build -j
bench:
	bash bench/run.sh
soak: build
	/usr/bin/python3 bench/soak.py --abx build/abx
fuzz-long:
	bash bench/fuzz-long.sh
catalog: build
	bash tests/drift.sh --update
clean:
	rm -rf build build-asan build-fuzz build-bench
