# The README's two commands. Each installs what it needs, then drives CMake.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)

.PHONY: all deps demo test build build-asan build-tsan compare clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNETVM_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# ThreadSanitizer, for the threads inside one process (application and
# progress thread); see tests/tsan.supp for what it cannot see.
build-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNETVM_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/tools/netvm run -n 4 -- $(BUILD)/examples/demo

test: build build-asan build-tsan
	@echo "== tests (release build)"
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
	@echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
	@echo "== tests under ThreadSanitizer"
	@cd $(TSAN_BUILD) && TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1" \
	    ctest --output-on-failure -j $(JOBS) --timeout 300 -LE bench

compare: build
	@scripts/install-deps.sh --peers
	@bench/compare --link shm --netvm $(BUILD)/tools/netvm --json $(BUILD)/compare-shm.json

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
