# The README's two commands. Each installs what it needs, then drives CMake.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)

.PHONY: all deps demo test build build-asan bench compare clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNETVM_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/tools/netvm run -n 4 -- $(BUILD)/examples/demo

test: build build-asan
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
	@cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

compare: build
	@scripts/install-deps.sh --peers
	@bench/compare --link shm --netvm $(BUILD)/tools/netvm --json $(BUILD)/compare-shm.json

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
