# Exit codes of signals, listed alike by every help text that lists exit codes and by the
# README (the behaviour itself is tested by tests/cli/interrupts, docs/reliability.md).
run --help; check "--help: 128 + N for signal N" 0 "130 SIGINT" "143" "SIGTERM, 129 SIGHUP"
run run --help; check "run --help: the signals' exit codes" 0 "130, 143, 129 stopped by SIGINT (Ctrl-C), SIGTERM, SIGHUP"
run sweep --help; check "sweep --help: the signals' exit codes" 0 "130, 143, 129 stopped by SIGINT (Ctrl-C), SIGTERM, SIGHUP"
check_that "README lists the signals' exit codes" grep -q "130 SIGINT or Ctrl-C, 143 SIGTERM," "$root/README.md"
check_that "docs/reliability.md lists them alike" grep -q "(130 SIGINT or Ctrl-C, 143 SIGTERM, 129 SIGHUP)" "$root/docs/reliability.md"
