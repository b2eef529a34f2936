# flashdecode: the two commands of the README's quick start.
#   make demo   install what is missing, build, run the demo
#   make test   install what is missing, build, run every test (ctest)

BUILD_DIR ?= build
LLVM_PREFIX ?= /usr/lib/llvm-22
PYTHON ?= /usr/bin/python3
JOBS ?= $(shell nproc)

# Debian packages the build, the tests and the Python module need
# (python3-torch: torch tensors and torch.distributed over gloo in the
# tests; python3-pip and python3-venv: the test of `pip install .`).
APT_PACKAGES := cmake ninja-build g++ llvm-22-dev libmlir-22-dev \
  mlir-22-tools llvm-22-tools libgtest-dev python3 python3-numpy \
  python3-pytest pybind11-dev python3-dev python3-matplotlib python3-torch \
  python3-pip python3-venv

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SHELL := /bin/bash

.PHONY: all deps configure build demo test clean

all: build

# Installs only what is absent, unattended; a no-op when all is there.
deps:
	@missing=""; \
	for package in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$package 2>/dev/null | \
	    grep -q "install ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/bin/lit \
	  -DPython3_EXECUTABLE=$(PYTHON)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The demo, then fd-bench on fdemu (Llama-3-8B's quick shapes, modeled) and
# its plots, so that a machine without a GPU sees them too.
demo: build
	$(BUILD_DIR)/bin/fd-demo --ptx-dir $(BUILD_DIR)/demo-ptx
	FD_CUDA_DRIVER=$(BUILD_DIR)/lib/libfdemu.so $(BUILD_DIR)/bin/fd-bench \
	  --quick --kernels $(BUILD_DIR)/bench-kernels-quick --configs llama3-8b \
	  --csv $(BUILD_DIR)/demo-bench/fd-bench.csv
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) -m flashdecode.plot \
	  $(BUILD_DIR)/demo-bench/fd-bench.csv --out $(BUILD_DIR)/demo-bench/plots

# ctest, then one plain closing line: skipped tests (no GPU, no ptxas) are
# not passes, and ctest's own summary counts them in its total.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) 2>&1 | tee ctest.log; \
	status=$${PIPESTATUS[0]}; \
	total=$$(grep -oE 'tests failed out of [0-9]+' ctest.log | grep -oE '[0-9]+$$'); \
	failed=$$(grep -oE '[0-9]+ tests failed out of' ctest.log | grep -oE '^[0-9]+'); \
	skipped=$$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$$' ctest.log); \
	echo "The 15 slowest tests:"; \
	awk '/Test +#[0-9]+: / { for (i = 1; i < NF; i++) if ($$i ~ /^#[0-9]+:$$/) { \
	  printf "%9.2f s  %s\n", $$(NF - 1), $$(i + 1); break } }' ctest.log | \
	  sort -rn | head -15; \
	echo "test: $$(( $${total:-0} - $${failed:-0} - skipped )) passed, $${failed:-0} failed, $$skipped skipped"; \
	exit $$status

clean:
	rm -rf $(BUILD_DIR)
