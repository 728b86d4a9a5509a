# ckplan: `make` builds ./ckplan, `make check` runs every test, `make demo` shows it working.
# Dependencies are Debian packages: `make demo` installs what building ckplan needs
# (deps-build), `make check` and `make deps` everything, the tests' tools included (as
# root through apt-get, otherwise they print the command to run and stop). The referee's
# Python side (PyTorch 2, transformers, PEFT) comes from PyPI into a virtual environment,
# .venv/, that `make deps` makes from tests/torch/requirements.txt.

CC ?= cc
PKGS := libcjson openblas cbc

# SAN=1 builds with AddressSanitizer and UBSan, at -O1, in build-san/ (BUILD and OPT given
# on the command line win).
SAN ?=
BUILD ?= $(if $(SAN),build-san,build)
OPT ?= $(if $(SAN),-O1,-O2)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# Each flag has one home. SOURCE_FLAGS say how the source is read (compiles only),
# CODE_FLAGS what code is made of it (compiles and links: the sanitizers need both).
# -fno-math-errno: nothing reads errno after a math function, and without it sqrtf is a
# call that no loop vectorises (the optimizer's update, sim/kernel.c).
# CFLAGS from the command line reach links too, so that a one-off flag such as
# -fsanitize=fuzzer-no-link needs no LDFLAGS twin.
SOURCE_FLAGS := -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -I.
# -pthread: dp fills its tables on several threads (planner/dp_rows.c).
CODE_FLAGS = -g $(OPT) -pthread -fno-math-errno $(if $(SAN),$(SAN_FLAGS))
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
COMPILE_FLAGS = $(SOURCE_FLAGS) $(CODE_FLAGS) $(PKG_CFLAGS) $(CFLAGS)
LINK_FLAGS = $(CODE_FLAGS) $(CFLAGS) $(LDFLAGS)
LDLIBS_ALL = $(PKG_LIBS) -lm $(LDLIBS)

LIB_SRC := $(sort $(wildcard planner/*.c sim/*.c))
CLI_SRC := $(sort $(wildcard cli/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_SUPPORT_SRC := $(sort $(filter-out $(TEST_SRC),$(wildcard tests/unit/*.c)))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
# cli/torch_runtime.py, the runtime of `emit torch`'s modules, as a C string of its own.
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/torch_runtime.o
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# ckplan-rank, the MPI worker of `ckplan run --ranks N` (mpi/), is built with OpenMPI's
# mpicc apart from ckplan, so that no other command links MPI; `make` builds it when mpicc
# is there (`make deps` installs it).
MPICC ?= mpicc
HAVE_MPICC := $(shell command -v $(MPICC) 2>/dev/null)
RANK_SRC := $(sort $(wildcard mpi/*.c))

# The referee's interpreter: the tests that import torch, transformers or peft run it, and
# find it through CKPLAN_PYTHON (tests/torch/run, tests/cli/suites/emit*.sh).
VENV ?= .venv
VENV_READY := $(VENV)/.installed
export CKPLAN_PYTHON := $(abspath $(VENV))/bin/python

.PHONY: all check check-unit check-cli check-bad check-torch check-hf check-style check-valgrind check-robustness fuzz demo \
	deps deps-build deps-python bench clean
all: ckplan $(if $(HAVE_MPICC),ckplan-rank)

# Objects are never intermediate: keep test support objects between runs.
.SECONDARY:

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(COMPILE_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/torch_runtime.c: cli/torch_runtime.py
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	@{ echo '/* Made by the Makefile from cli/torch_runtime.py: edit that file. */'; \
	  echo '#include "cli/emit_torch.h"'; echo 'const char ck_emit_torch_runtime[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; echo ';'; } > $@.tmp
	@mv $@.tmp $@

$(BUILD)/gen/torch_runtime.o: $(BUILD)/gen/torch_runtime.c
	@echo "  CC      $<"
	@$(CC) $(COMPILE_FLAGS) -c $< -o $@

# Only tests use Check: building ckplan does not need it installed.
$(BUILD)/tests/%.o: COMPILE_FLAGS += $(CHECK_CFLAGS)

$(BUILD)/libckplan.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

# The command-line modules but main(), for the unit tests of cli/ (charts, traces, files,
# signals) to link like the library, through their headers.
$(BUILD)/libckplan-cli.a: $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ))
	@rm -f $@
	@ar rcs $@ $^

# The sanitizer build lives in build-san/, with its binary there too.
ifeq ($(BUILD),build)
CKPLAN := ckplan
else
CKPLAN := $(BUILD)/ckplan
endif

$(CKPLAN): $(CLI_OBJ) $(BUILD)/libckplan.a
	@echo "  LINK    $@"
	@$(CC) $(LINK_FLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libckplan.a $(LDLIBS_ALL)

# Beside the ckplan of the same build, where `run --ranks` looks for it.
RANK_BIN := $(dir $(CKPLAN))ckplan-rank
RANK_BIN := $(RANK_BIN:./%=%)

$(BUILD)/mpi/%.o: mpi/%.c
	@mkdir -p $(dir $@)
	@echo "  MPICC   $<"
	@$(MPICC) $(COMPILE_FLAGS) -MMD -MP -c $< -o $@

$(RANK_BIN): $(RANK_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libckplan-cli.a $(BUILD)/libckplan.a
	@echo "  LINK    $@"
	@$(MPICC) $(LINK_FLAGS) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(TEST_SUPPORT_OBJ) $(BUILD)/libckplan-cli.a $(BUILD)/libckplan.a
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(LINK_FLAGS) -o $@ $< $(TEST_SUPPORT_OBJ) $(BUILD)/libckplan-cli.a $(BUILD)/libckplan.a $(CHECK_LIBS) $(LDLIBS_ALL)

# Every test: the source checks (their failures are counted, and fail the last line,
# without stopping the rest), unit tests, command-line tests and the bad-input corpus, and
# the last three again under AddressSanitizer and UndefinedBehaviorSanitizer, on two cores
# (each pass is single-threaded): the sanitizers' command-line tests, the longest part, on
# one, and the plain pass then the sanitizers' unit and bad-input tests on the other, the
# background pass's output shown when it ends (the unit-test programs of both builds are
# made first: the command-line tests' chart smoke test runs two of them); then, again on
# both cores, plan, run and report under valgrind, interrupts and fault injection (one
# process at a time) beside the PyTorch and Hugging Face referees (their output shown when
# they end); fuzzing; the last line adds them all up.
check: deps
	@rm -rf build/results build/check-*.log
	-$(MAKE) --no-print-directory check-style
	$(MAKE) --no-print-directory ckplan ckplan-rank $(TEST_BIN)
	$(MAKE) --no-print-directory SAN=1 build-san/ckplan build-san/ckplan-rank $(TEST_BIN:$(BUILD)/%=build-san/%)
	@$(MAKE) --no-print-directory SAN=1 check-cli > build/check-san.log 2>&1 & \
	san=$$!; $(MAKE) --no-print-directory check-unit check-cli check-bad; plain=$$?; \
	$(MAKE) --no-print-directory SAN=1 check-unit check-bad; rest=$$?; \
	wait $$san; status=$$?; cat build/check-san.log; \
	[ $$plain -eq 0 ] && [ $$rest -eq 0 ] && [ $$status -eq 0 ]
	@$(MAKE) --no-print-directory check-torch check-hf > build/check-referees.log 2>&1 & \
	referees=$$!; $(MAKE) --no-print-directory check-valgrind check-robustness; mine=$$?; \
	wait $$referees; status=$$?; cat build/check-referees.log; \
	[ $$mine -eq 0 ] && [ $$status -eq 0 ]
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)
	@tests/summary build/results

check-unit: $(TEST_BIN)
	@tests/run-unit build/results/unit-$(notdir $(BUILD)) $(TEST_BIN)

# With OpenMPI there (make deps), the worker of run --ranks too: tests/cli/suites/ranks.sh.
check-cli: $(CKPLAN) $(if $(HAVE_MPICC),$(RANK_BIN)) $(VENV_READY)
	@tests/cli/run build/results/cli-$(notdir $(BUILD)) ./$(CKPLAN)

check-bad: $(CKPLAN)
	@tests/bad/run build/results/bad-$(notdir $(BUILD)) ./$(CKPLAN)

# PyTorch 2 (from PyPI, in .venv/) as the second referee: docs/pytorch.md.
check-torch: $(CKPLAN) $(VENV_READY)
	@tests/torch/run build/results/torch ./$(CKPLAN) build/torch-referee.tsv

# Hugging Face transformers and PEFT themselves, every family's tiny config: docs/pytorch.md.
check-hf: $(CKPLAN) $(VENV_READY)
	@tests/torch/run-hf build/results/hf ./$(CKPLAN) build/hf-referee.tsv

# Source rules (tests/style/): which layer includes which, function names, and library
# calls that fail silently.
check-style:
	@status=0; \
	tests/style/layers build/results/style-layers || status=1; \
	tests/style/prefixes build/results/style-prefixes || status=1; \
	tests/style/calls build/results/style-calls || status=1; \
	exit $$status

check-valgrind: $(CKPLAN)
	@tests/valgrind/run build/results/valgrind ./$(CKPLAN)

# Ctrl-C during run and sweep, and the N-th allocation or write failing (docs/reliability.md).
check-robustness: $(CKPLAN)
	@tests/cli/interrupts build/results/interrupts ./$(CKPLAN)
	@tests/faults/run build/results/faults

# libFuzzer targets (tests/fuzz/README.md): each runs FUZZ_SECONDS, after replaying every
# saved regression. make check fuzzes 25 s a target under CI, 10 s otherwise.
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS := $(if $(CI),25,10)
fuzz: ckplan
	@tests/fuzz/run $(FUZZ_SECONDS)

# The fuzz targets' link, for tests/fuzz/run, which builds them with BUILD=build/fuzz
# CC=clang SAN=1 CFLAGS=-fsanitize=fuzzer-no-link: each target with the readers it fuzzes
# (planner/, and the runs reader of cli/ with what it prints through).
FUZZ_LIB_OBJ := $(filter $(BUILD)/planner/%,$(LIB_OBJ)) $(BUILD)/sim/record.o
$(BUILD)/bin/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(LINK_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS_ALL)

# Benchmarks: planner speed, written with the command and machine to docs/benchmarks.md.
$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(TEST_SUPPORT_OBJ) $(BUILD)/libckplan.a
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(LINK_FLAGS) -o $@ $< $(TEST_SUPPORT_OBJ) $(BUILD)/libckplan.a $(CHECK_LIBS) $(LDLIBS_ALL)

# deps first, then a fresh make: pkg-config flags are read when make starts, so targets
# that install dependencies must build in a second invocation.
bench: deps
	@$(MAKE) --no-print-directory ckplan $(BUILD)/bench/bench_planners $(BUILD)/bench/bench_kernels \
	  $(BUILD)/bench/bench_graphs $(BUILD)/bench/graph_class
	@{ echo "# Benchmarks"; echo; \
	  echo "Written by \`make bench\` on $$(date -u +%Y-%m-%d), on $$(nproc) cores of"; \
	  echo "$$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), build flags \`$(OPT)\`."; \
	  echo "Timings depend on what else the machine is doing: run it on a quiet machine."; \
	  echo; echo "## Planner speed"; echo; \
	  echo "Each planner plans at the budget half-way between dp's minimum and the"; \
	  echo "store-everything peak (\`$(BUILD)/bench/bench_planners\`, source"; \
	  echo "\`tests/bench/bench_planners.c\`): the random chain is 100 heterogeneous stages with"; \
	  echo "500 memory slots; the models use the default cost model."; echo; \
	  $(BUILD)/bench/bench_planners; \
	  echo; echo "## Linear layers: kernels against cblas_sgemm alone"; echo; \
	  echo "\`$(BUILD)/bench/bench_kernels\` (source \`tests/bench/bench_kernels.c\`) times"; \
	  echo "ck_kernel_linear_forward and ck_kernel_linear_backward on the linear layers of gpt2-tiny and"; \
	  echo "gpt2-small and the same sgemm calls made directly (GFLOP/s, median); target: the"; \
	  echo "kernels reach at least 85% of sgemm alone."; echo; \
	  $(BUILD)/bench/bench_kernels; \
	  echo; echo "## Predicted against measured, gpt2-tiny"; echo; \
	  echo "Each planner's plan runs with \`ckplan run --verify --steps 5\`"; \
	  echo "(\`tests/bench/predicted_vs_measured.sh\`). First with the roofline cost model, then"; \
	  echo "with stage times from \`ckplan profile --steps 9\` (target: predicted and measured"; \
	  echo "overheads agree within 15%). A planner missing from a table has no plan that fits"; \
	  echo "the budget."; echo; \
	  echo "### Roofline cost model"; echo; \
	  tests/bench/predicted_vs_measured.sh ./ckplan models/gpt2-tiny.json; \
	  ./ckplan profile models/gpt2-tiny.json --steps 9 -o $(BUILD)/bench/gpt2-tiny.costs.json > /dev/null; \
	  echo; echo "### Profiled costs"; echo; \
	  tests/bench/predicted_vs_measured.sh ./ckplan models/gpt2-tiny.json $(BUILD)/bench/gpt2-tiny.costs.json; \
	  echo; echo "## Scale: runs files, large models, long chains"; echo; \
	  echo "What used to grow faster than the input: appending a record cost the whole runs"; \
	  echo "file, names were looked up by comparing each with every other, and revolve and"; \
	  echo "chen built a whole schedule for every candidate. The figures below are this"; \
	  echo "build's; the last section gives the same commands before the fixes."; echo; \
	  tests/bench/append.sh ./ckplan; echo; \
	  tests/bench/loading.sh ./ckplan; echo; \
	  tests/bench/planners_scale.sh ./ckplan; echo; \
	  cat tests/bench/scale-before.md; \
	  echo; echo "## dp at scale"; echo; \
	  echo "dp with 500 memory slots on long heterogeneous chains (\`tests/bench/dp_scale.sh ./ckplan\`;"; \
	  echo "target: 1,000 stages within 10 s and 1 GiB)."; echo; \
	  tests/bench/dp_scale.sh ./ckplan; \
	  echo; tests/bench/gpus.sh ./ckplan; \
	  echo; echo "## Training graphs: Checkmate's seven, planned node by node"; echo; \
	  echo "The fast planner (the default for graphs) and milp (Checkmate's MILP, solved by COIN-OR"; \
	  echo "CBC) at 0.9x and 0.7x each graph's no-rematerialization peak and at its smallest"; \
	  echo "feasible budget (docs/planners.md, \"Graphs\"). Targets: fast within 2% of every proven"; \
	  echo "optimum, under a second a plan."; echo; \
	  tests/bench/graphs_fast.sh ./ckplan; echo; \
	  tests/bench/graphs.sh $(BUILD)/bench/bench_graphs; \
	  echo; tests/bench/selective.sh ./ckplan; \
	  echo; echo "## Lifetimes: gpt2-tiny and llama-tiny"; echo; \
	  echo "Activation peaks measured by \`ckplan run\` (\`tests/bench/lifetimes.sh ./ckplan"; \
	  echo "models/gpt2-tiny.json models/llama-tiny.json\`): the store-everything baseline, dp's"; \
	  echo "smallest plan, and the rises of the first block's actions in its derived chain (a"; \
	  echo "saving forward rises x̄ + fwd_tmp, a bound; a backward y_i + bwd_tmp, exact). Saved"; \
	  echo "tensors die after the last backward that reads them and token ids are static (docs/"; \
	  echo "model-format.md section 4); the figures before that change follow."; echo; \
	  tests/bench/lifetimes.sh ./ckplan models/gpt2-tiny.json models/llama-tiny.json; echo; \
	  cat tests/bench/lifetimes-before.md; \
	  echo; echo "## A training step: ckplan's executor against PyTorch"; echo; \
	  echo "One store-everything step (forward, backward, optimizer) of each shipped model with"; \
	  echo "\`ckplan run\` and with \`ckplan emit torch\`'s module in PyTorch 2.13, on the same OpenBLAS,"; \
	  echo "alternating (\`tests/bench/step_vs_torch.sh\`, the models as below: gpt2-small with its"; \
	  echo "widths but 2 layers at 64 tokens, the Hugging Face tiny configs in fp32; the 16-bit models"; \
	  echo "have no like-for-like PyTorch on CPU). Target: ckplan's step at most PyTorch's (ratio <= 1)"; \
	  echo "on gpt2-tiny and llama-tiny."; echo; \
	  tests/bench/step_vs_torch.sh ./ckplan models/gpt2-tiny.json models/llama-tiny.json \
	    models/mlp-deep.json "gpt2-small-2L models/gpt2-small.json --set L=2 --seq 64 --batch 1" \
	    $(foreach c,$(wildcard models/hf/*.json),"hf-$(basename $(notdir $(c))) $(c) --recipe fp32"); \
	  echo; echo "## PyTorch as the referee: saved bytes, peaks, gradients"; echo; \
	  echo "Every shipped model under every planner, run in PyTorch 2.13 by \`ckplan emit torch\`'s"; \
	  echo "module (\`tests/bench/torch_referee.sh ./ckplan\`, the figures of \`make check-torch\`;"; \
	  echo "method: docs/pytorch.md)."; echo; \
	  tests/bench/torch_referee.sh ./ckplan; \
	  echo; echo "## Hugging Face transformers as the referee: step peaks"; echo; \
	  echo "Every family's tiny config built by transformers itself and trained as users train"; \
	  echo "it (\`tests/bench/hf_referee.sh ./ckplan\`, the figures of \`make check-hf\`; method:"; \
	  echo "docs/pytorch.md)."; echo; \
	  tests/bench/hf_referee.sh ./ckplan; \
	} > docs/benchmarks.md.tmp && mv docs/benchmarks.md.tmp docs/benchmarks.md
	@cat docs/benchmarks.md

# Everything the demo writes goes to demo/, made afresh each time.
demo: deps-build
	@$(MAKE) --no-print-directory ckplan
	@rm -rf demo && mkdir demo
	./ckplan plan models/gpt2-tiny.json --budget 22M -o demo/plan.json --svg demo/plan.svg
	./ckplan run demo/plan.json --verify --runs demo/runs.jsonl --svg demo/run.svg --trace demo/run.trace.json
	./ckplan sweep models/gpt2-tiny.json --budgets 17M:26M:4 --runs demo/runs.jsonl
	./ckplan report --runs demo/runs.jsonl --svg demo
	@echo "memory timelines: demo/plan.svg (predicted) and demo/run.svg (predicted and measured);"
	@echo "trace of one step of each: demo/run.trace.json (open it in Perfetto or chrome://tracing)"

# What each need is and which Debian package meets it, as KIND:NAME:PACKAGE, KIND being cmd
# (a command), pc (a pkg-config module) or deb (an installed package). Building ckplan
# needs a C compiler and the libraries; the tests add Check, python3 with venv (the
# command-line tests, and the interpreter of .venv/), valgrind, clang with its sanitizer and
# libFuzzer runtime (libclang-rt-dev: the runtime of Debian's default clang, whichever
# release that is), and OpenMPI (mpicc and mpirun: `run --ranks N`'s worker and launcher,
# docs/parallel.md). KIND py is a module python3 must import.
DEPS_BUILD := cmd:$(firstword $(CC)):$(if $(findstring clang,$(CC)),clang,gcc) \
	cmd:pkg-config:pkg-config pc:libcjson:libcjson-dev pc:openblas:libopenblas-dev \
	pc:cbc:coinor-libcbc-dev
DEPS_TESTS := pc:check:check cmd:python3:python3 py:ensurepip:python3-venv cmd:valgrind:valgrind \
	cmd:clang:clang deb:libclang-rt-dev:libclang-rt-dev \
	cmd:mpicc:libopenmpi-dev cmd:mpirun:openmpi-bin

# $(call install_missing,NEEDS): as root, apt-get installs the packages of the needs not
# met; otherwise prints the command that would and fails.
define install_missing
	@missing=""; \
	for need in $(1); do \
		kind=$${need%%:*}; name=$${need#*:}; package=$${name#*:}; name=$${name%%:*}; \
		case $$kind in \
			cmd) command -v "$$name" ;; \
			pc) pkg-config --exists "$$name" ;; \
			py) python3 -c "import $$name" ;; \
			deb) dpkg -s "$$name" ;; \
		esac >/dev/null 2>&1 || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
		else \
			echo "missing packages:$$missing"; \
			echo "install them with: sudo apt-get install$$missing"; exit 1; \
		fi; \
	fi
endef

deps-build:
	$(call install_missing,$(DEPS_BUILD))

deps:
	$(call install_missing,$(DEPS_BUILD) $(DEPS_TESTS))
	@$(MAKE) --no-print-directory deps-python

# The virtual environment, made anew when the requirements change. pip takes torch from the
# machine's disk where it lies there (a pinned CPU wheel), the rest from PyPI.
deps-python: $(VENV_READY)
$(VENV_READY): tests/torch/requirements.txt
	@echo "making $(VENV)/ from $< (PyTorch, transformers, PEFT)"
	@rm -rf $(VENV) && python3 -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -r $< 2>&1 | grep -v "is ignored: it is neither" >&2; \
	$(VENV)/bin/python -c "import torch, transformers, peft" && touch $@

# Every folder the build and the tests write (build/ holds build/fuzz/ and build/results/;
# tests/faults/run builds in build-faults/), and the demo's.
clean:
	rm -rf build build-san build-faults $(BUILD) ckplan ckplan-rank demo

# Every object's dependency file, whichever list its source came from: touching a header
# rebuilds each object that includes it.
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
