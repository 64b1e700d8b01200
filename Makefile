# rlpipe — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
PKGS ?= ./...
BIN := bin/rlpipe
FUZZTIME ?= 20s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## install what the tests need on a fresh Debian machine
	@./scripts/deps.sh

.PHONY: build
build: ## build bin/rlpipe
	$(GO) build -o $(BIN) ./cli/rlpipe

.PHONY: test
# The Temporal tests run an in-process Temporal server: they run without
# the race detector, which would slow the server's own hundreds of
# goroutines several-fold (and its cold compile by many minutes). The
# code they exercise on our side is race-tested in ./pipeline.
TEMPORAL_TESTS := ./pipeline/temporalrun/temporaltests
# Packages that link Temporal's server and have no tests of their own
# (`rlpipe temporal dev`): `go test -race` would still compile the server
# with the race detector, for nothing. The Temporal tests run them.
NO_RACE := /temporaltests|/temporalrun/devserver|/cli/rlpipe$$
# The demos' learning tests train the embedded model for 16 and 20
# iterations, pure arithmetic the race detector slows 5–10×: under -race
# they run 2 on a smaller held-out set (the loop's concurrency is what the
# detector checks), and their full length runs here without it (raceOn in
# cli/race_on_test.go), after the notebooks' build compiled the packages;
# the tools and reasoning-gym demos' learning runs (examples/tools-demo,
# examples/reasoning-gym-demo) run only here.
LEARNS_TESTS := TestArithmeticDemoLearns|TestArithmeticFullDemoLearns|TestChainLearns

test: deps ## run every test with the race detector, then the Temporal tests, the notebooks, the demos' full learning runs without it, and the demo through a lakeFS stand-in
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list $(PKGS) | grep -Ev '$(NO_RACE)')
	$(GO) test -count=1 -timeout 20m $(TEMPORAL_TESTS)
	$(MAKE) --no-print-directory notebooks
	$(GO) test -count=1 -timeout 20m -run '^($(LEARNS_TESTS))$$' ./cli/
	$(GO) test -count=1 -timeout 20m -run '^(TestToolsDemoLearns|TestReasoningGymDemoLearns)$$' ./examples/tools-demo/ ./examples/reasoning-gym-demo/
	@QUIET=1 ./scripts/demo-lakefs.sh

.PHONY: notebooks
notebooks: build ## execute the notebooks headlessly against a short demo run
	@./scripts/notebook-deps.sh
	@RLPIPE_BIN=$(CURDIR)/$(BIN) ./scripts/notebooks.sh

.PHONY: chaos
chaos: ## run the kill -9 tests with many trials
	RLPIPE_CHAOS_TRIALS=20 $(GO) test -race -count=1 -run 'Kill' ./pipeline/... ./artifacts/local/ ./cli/ ./sandbox/

.PHONY: demo
demo: build ## the RL loop on the embedded model: GRPO, evaluation, a report (about 30 s on 2 idle cores; minutes on loaded ones, see README)
	@./scripts/demo.sh

.PHONY: demo-agent
demo-agent: build ## multi-turn RL: GRPO on episodes of a running sum, trained on the model's own tokens (about 30 s on two quiet cores)
	@./scripts/demo-agent.sh

.PHONY: demo-rg
demo-rg: build ## reasoning-gym: GRPO on tiny-rg, scored by reasoning-gym's own score_answer in the Python worker (a few minutes)
	@./scripts/demo-rg.sh

.PHONY: demo-tools
demo-tools: build ## agentic RL in sandboxes: GRPO on tiny-tool's Hermes tool calls in bubblewrap worlds, a separate-sandbox verifier (about a minute)
	@./scripts/demo-tools.sh

.PHONY: demo-lakefs
demo-lakefs: build ## the demo through the lakeFS backend, against a stand-in that races reads with commits as lakeFS does
	@./scripts/demo-lakefs.sh

.PHONY: bench
# What the benchmarks print, kept for bench/verdict (and to read again).
BENCH_OUT ?= bench.out

bench: deps ## run the benchmarks, print their ratios, then each target MET or NOT MET
	@set -o pipefail; { \
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 60m $$($(GO) list ./artifacts/... ./pipeline/... | grep -v /temporaltests) && \
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 10x -timeout 30m ./policy/... ./rollouts/... ./environments/... ./trainers/... && \
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./evaluators/... ./reports/... && \
	$(GO) test -run '^$$' -bench VLLM -benchtime 3x -timeout 30m ./bench/vllm/ && \
	$(GO) test -run '^$$' -bench TorchStep -benchtime 3x -timeout 30m ./bench/torch/ && \
	$(GO) test -run '^$$' -bench Harbor -benchtime 1x -timeout 10m ./bench/harbor/ && \
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/trl/ && \
	$(GO) test -run '^$$' -bench MathVerify -benchtime 1x -timeout 30m ./bench/mathverify/ && \
	$(GO) test -run '^$$' -bench SkyRLGym -benchtime 1x -timeout 30m ./bench/skyrlgym/ && \
	$(GO) test -run '^$$' -bench OpenEnv -benchtime 1x -timeout 30m ./bench/openenv/ && \
	$(GO) test -run '^$$' -bench 'DemoOverlap|EvalBackfill|LongRun' -benchtime 1x -timeout 45m ./cli/ && \
	$(GO) test -run '^$$' -bench Temporal -benchtime 1x -timeout 30m $(TEMPORAL_TESTS) && \
	(cd bench/rescore && $(GO) test -run '^$$' -bench Rescore -benchtime 1x -timeout 30m .); \
	} 2>&1 | tee $(BENCH_OUT)
	@$(GO) run ./bench/verdict $(BENCH_OUT)

.PHONY: fuzz
fuzz: ## fuzz every parser for FUZZTIME each
	@set -e; for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz $$t $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$t; \
	  done; done

.PHONY: lint
lint: ## gofmt, go vet, and no new dropped encode error
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run: make fmt"; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) test -count=1 ./internal/encodecheck

.PHONY: fmt
fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

.PHONY: cover
cover: ## test coverage report in cover.out
	$(GO) test -count=1 -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1

.PHONY: clean
clean: ## remove build outputs and local stores
	rm -rf bin cover.out bench.out .rlpipe .rlpipe-demo .rlpipe-demo-agent .rlpipe-demo-rg .rlpipe-demo-tools
