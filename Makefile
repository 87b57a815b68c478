# dsinfer build. `make help` lists the targets.
#
# Layout: every src/*/ folder except src/cli goes into the library (build/libdsinfer.a); src/cli/*.c
# makes the one `dsinfer` binary; tests/unit/test_*.c are each a test program linked against the
# library; tests/scripts/*.sh are shell tests run after them. CUDA sources (src/backend/cuda/*.cu)
# are built only when nvcc is found (NVCC= disables them).

CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
BUILD   ?= build
SAN     ?= 0
OPT     ?= -O2

PKG_CFLAGS := $(shell pkg-config --cflags libcjson libpcre2-8 libmicrohttpd 2>/dev/null)
CFLAGS  := -std=c11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp -march=x86-64-v2 \
           -Iinclude -Isrc $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  := -lcjson -lpcre2-8 -lmicrohttpd -lm -lpthread
LDFLAGS := -fopenmp

ifeq ($(SAN),1)
  BUILD   := build-san
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC  := $(filter-out src/cli/%,$(wildcard src/*/*.c src/*/*/*.c))
CLI_SRC  := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/unit/test_*.c)
CU_SRC   := $(wildcard src/backend/cuda/*.cu)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# The toolkit root holds include/ and lib64/ (cudart, cuBLAS, cuBLASLt). nvcc may be a wrapper script
# outside it (CI has /usr/local/bin/nvcc exec'ing the real one), so the root is the first candidate
# that has lib64/ (or lib/) libcudart.so; without one the CUDA sources are not built.
CUDA_LIBDIR := $(firstword $(foreach d,$(CUDA_HOME) $(CUDA_PATH) /usr/local/cuda $(patsubst %/bin/nvcc,%,$(NVCC)),\
                 $(wildcard $(d)/lib64/libcudart.so $(d)/lib/libcudart.so)))
CUDA_LIBDIR := $(patsubst %/libcudart.so,%,$(CUDA_LIBDIR))
CUDA_HOME   := $(patsubst %/,%,$(dir $(CUDA_LIBDIR)))
ifeq ($(CUDA_LIBDIR),)
  ifneq ($(NVCC),)
    $(info nvcc found at $(NVCC) but no CUDA toolkit with lib64/libcudart.so: building without CUDA)
  endif
  NVCC :=
endif

ifneq ($(NVCC),)
ifneq ($(CU_SRC),)
  CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.o)
  CFLAGS    += -DDS_HAVE_CUDA -I$(CUDA_HOME)/include
  LDLIBS    += -L$(CUDA_LIBDIR) -lcublasLt -lcublas -lcudart -lstdc++
  NVFLAGS   := -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xcompiler -Wall,-Werror
endif
endif

.PHONY: all help deps test test-fast test-san run clean bench
all: $(BUILD)/dsinfer  ## build the library and the dsinfer binary

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' Makefile | sed 's/:.*## /\t/'

deps:  ## install missing Debian packages (needs root or sudo)
	@missing=""; for p in gcc make pkg-config libcjson-dev libpcre2-dev libmicrohttpd-dev; do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	for pc in nodejs:node npm:npm chromium:chromium; do \
	  command -v $${pc#*:} >/dev/null 2>&1 || missing="$$missing $${pc%%:*}"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  SUDO=$$( [ $$(id -u) = 0 ] || echo sudo ); $$SUDO apt-get update && $$SUDO apt-get install -y $$missing; \
	else echo "all Debian packages present"; fi

# The DSINFER_* names the sources read (string literals; tools/env_names.sh), for env_check.c's warning about settings
# nothing reads; rewritten only when the list changes, so that env_check.o rebuilds only then
# (not test_env_check.c: its misspelt names must stay unknown)
ENV_SCAN := $(sort $(filter-out tests/unit/test_env_check.c,$(wildcard src/*/*.[ch] src/*/*/*.[ch] src/backend/cuda/*.cu \
              src/backend/cuda/*.cuh include/*.h tests/unit/*.c dev/cuda/trace/*.c)))
$(BUILD)/gen/env_names.inc: $(ENV_SCAN) tools/env_names.sh Makefile
	@mkdir -p $(dir $@)
	@sh tools/env_names.sh $(ENV_SCAN) > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/src/core/env_check.o: $(BUILD)/gen/env_names.inc
$(BUILD)/src/core/env_check.o: CFLAGS += -I$(BUILD)/gen

$(BUILD)/libdsinfer.a: $(LIB_OBJ) $(CU_OBJ)
	ar rcs $@ $^

$(BUILD)/dsinfer: $(CLI_OBJ) $(BUILD)/libdsinfer.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libdsinfer.a $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(BUILD)/libdsinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(BUILD)/libdsinfer.a $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c -o $@ $<

tests-build: $(BUILD)/dsinfer $(TEST_BIN)

test-fast: ## build and run the tests without sanitizers
	$(MAKE) tests-build
	BUILD=$(BUILD) tests/run_tests.sh

test-san: ## build and run the tests under ASan + UBSan
	$(MAKE) SAN=1 tests-build
	BUILD=build-san tests/run_tests.sh

test: ## the full test suite: plain build, then ASan + UBSan build
	$(MAKE) test-fast
	$(MAKE) test-san

run: $(BUILD)/dsinfer  ## build, then generate from the demo model that ships in the repo (models/demo)
	$(BUILD)/dsinfer generate --model models/demo --prompt "And God said" -n 64 --temperature 0.8 --top-p 0.95 --seed 1

clean:  ## remove build outputs
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(CU_OBJ:.o=.d)
